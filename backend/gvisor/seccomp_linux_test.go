package gvisor

import (
	_ "embed"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/execbox/execbox/internal/host/seccomp"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// syscallProbe calls every syscall it is given with all arguments -1 and
// prints what each answered (see the script).
//
//go:embed testdata/syscalls.py
var syscallProbe []byte

// rulesOf lists, per syscall name, the actions of the rules naming it.
func rulesOf(p *specs.LinuxSeccomp) map[string][]string {
	m := map[string][]string{}
	for _, r := range p.Syscalls {
		a := string(r.Action)
		if len(r.Args) > 0 {
			a += "+args"
		}
		for _, n := range r.Names {
			if !slices.Contains(m[n], a) {
				m[n] = append(m[n], a)
			}
		}
	}
	return m
}

// syscallNames is the host's syscall table (name to number); on an
// architecture without one (the backend's policy cannot be built there)
// the test skips, or fails when EXECBOX_REQUIRE names gvisor.
func syscallNames(t *testing.T) map[string]int {
	t.Helper()
	numbers, _, err := hostSyscalls()
	if err != nil {
		testutil.SkipOrFail(t, Name, "no syscall table: %v", err)
	}
	return numbers
}

// The translation for a runsc table that names syscall 270 "pselect"
// (runsc before 2023), lacks write(2) and has a number Linux's table does
// not: names become runsc's, every number runsc knows gets a rule, the
// default (ENOSYS) is left for what it does not know.
func TestSeccompTranslation(t *testing.T) {
	numbers := syscallNames(t)
	table := map[int]string{}
	for n, nr := range numbers {
		if nr < 512 {
			table[nr] = n
		}
	}
	table[numbers["pselect6"]] = "pselect"
	delete(table, numbers["write"])
	table[511] = "future_call"
	p, err := seccompPolicy(table)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := seccomp.DockerProfile()
	if err != nil {
		t.Fatal(err)
	}
	var orig specs.LinuxSeccomp
	if err := json.Unmarshal(raw, &orig); err != nil {
		t.Fatal(err)
	}
	if p.oci.DefaultAction != specs.ActTrace || p.oci.DefaultErrnoRet != nil {
		t.Errorf("default action %s %v, want SCMP_ACT_TRACE (ENOSYS)", p.oci.DefaultAction, p.oci.DefaultErrnoRet)
	}
	got, want := rulesOf(p.oci), rulesOf(&orig)
	for name, acts := range map[string][]string{
		"pselect":     {"SCMP_ACT_ALLOW"},
		"pselect6":    nil,
		"write":       nil,
		"read":        {"SCMP_ACT_ALLOW"},
		"clone3":      {"SCMP_ACT_TRACE"},
		"ptrace":      {"SCMP_ACT_ERRNO"},
		"vhangup":     {"SCMP_ACT_ERRNO"}, // in no rule of the policy: its default
		"future_call": {"SCMP_ACT_ERRNO"},
		"clone":       {"SCMP_ACT_ALLOW+args", "SCMP_ACT_ERRNO"},
		"socket":      {"SCMP_ACT_ALLOW+args", "SCMP_ACT_ERRNO"},
		"personality": {"SCMP_ACT_ALLOW+args", "SCMP_ACT_ERRNO"},
	} {
		if !slices.Equal(got[name], acts) {
			t.Errorf("%s: rules %v, want %v", name, got[name], acts)
		}
	}
	// Every other name keeps its rule, and every number runsc knows has one.
	for name, acts := range want {
		if name == "pselect6" || name == "write" || name == "clone3" || name == "personality" || name == "socket" || name == "clone" {
			continue
		}
		if !slices.Equal(got[name], acts) {
			t.Errorf("%s: rules %v, the policy's %v", name, got[name], acts)
		}
	}
	for _, n := range table {
		if len(got[n]) == 0 {
			t.Errorf("%s: no rule; it would get the default (ENOSYS)", n)
		}
	}
	for _, r := range p.oci.Syscalls {
		if r.ErrnoRet != nil {
			t.Errorf("rule %v keeps errnoRet %d, which runsc ignores", r.Names, *r.ErrnoRet)
		}
	}
	// The EPERM for the arguments no rule allows comes after the rules
	// that allow some.
	last := -1
	for i, r := range p.oci.Syscalls {
		if len(r.Args) > 0 {
			last = i
		}
		if r.Action == specs.ActErrno && slices.Contains(r.Names, "socket") && i < last {
			t.Errorf("socket's EPERM rule (%d) comes before its allow rules (%d)", i, last)
		}
	}
	if !slices.Equal(p.unimplemented, []string{"write"}) {
		t.Errorf("unimplemented %v, want [write]", p.unimplemented)
	}
}

// syscallTable runs the probe over every syscall of the host's table in a
// fresh sandbox of b; noPolicy runs it without the seccomp policy.
func syscallTable(t *testing.T, b *Backend, noPolicy bool) map[string]string {
	t.Helper()
	numbers := syscallNames(t)
	probe := map[string]int{}
	for n, nr := range numbers {
		if nr < 1024 {
			probe[n] = nr
		}
	}
	arg, _ := json.Marshal(probe)
	sb := testutil.Create(t, b, sandbox.Spec{Limits: sandbox.Limits{Wall: 60 * time.Second}})
	if noPolicy {
		sb.(*Sandbox).seccomp = nil
	}
	if err := sb.WriteFiles(t.Context(), map[string][]byte{"syscalls.py": syscallProbe}); err != nil {
		t.Fatal(err)
	}
	res := testutil.Exec(t, sb, "/usr/bin/python3", "/work/syscalls.py", string(arg))
	testutil.WantOK(t, res)
	var out map[string]string
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("probe output %q: %v (stderr %q)", res.Stdout, err, res.Stderr)
	}
	return out
}

// The whole syscall table, with and without execbox's policy: every
// syscall the policy allows answers exactly as it does without a policy
// (the policy is transparent to it), every one it denies answers EPERM,
// as on the host (clone3 ENOSYS), and what this runsc does not implement
// answers ENOSYS either way. Argument rules are probed on both sides.
func TestSyscallTable(t *testing.T) {
	b := newBackend(t)
	pol := b.Host().Own.policy
	raw, err := seccomp.DockerProfile()
	if err != nil {
		t.Fatal(err)
	}
	var orig specs.LinuxSeccomp
	if err := json.Unmarshal(raw, &orig); err != nil {
		t.Fatal(err)
	}
	rules := rulesOf(&orig)
	numbers, goarch, _ := hostSyscalls()
	table, err := b.Host().Own.runsc.syscalls(goarch)
	if err != nil {
		t.Fatal(err)
	}
	with := syscallTable(t, b, false)
	without := syscallTable(t, b, true)
	if without["getpid"] != "OK" || without["select"] != "EINVAL" && without["select"] != "EFAULT" {
		t.Fatalf("the probe without a policy is off: getpid %s, select %s", without["getpid"], without["select"])
	}
	counts := map[string]int{}
	for name, got := range with {
		if got == "SKIP" {
			counts["skipped"]++
			continue
		}
		base, variant, _ := strings.Cut(name, ":")
		var want, kind string
		acts := rules[base]
		switch {
		case table[numbers[base]] == "" && variant == "":
			want, kind = "ENOSYS", "not in this runsc's table"
		case variant != "" && slices.Contains([]string{"fork", "unix", "query"}, variant):
			want, kind = without[name], "allowed for these arguments: as without a policy"
		case variant != "":
			want, kind = "EPERM", "denied for these arguments"
		case slices.Contains(acts, "SCMP_ACT_ALLOW"):
			want, kind = without[name], "allowed: as without a policy"
		case slices.Contains(acts, "SCMP_ACT_ALLOW+args"):
			want, kind = "EPERM", "denied for all arguments -1"
		case slices.Contains(acts, "SCMP_ACT_ERRNO") && base == "clone3":
			want, kind = "ENOSYS", "denied with ENOSYS"
		default:
			want, kind = "EPERM", "denied"
		}
		if got != want {
			t.Errorf("%s (%s): %s with the policy, want %s (without a policy: %s)", name, kind, got, want, without[name])
			continue
		}
		counts[kind]++
	}
	t.Logf("runsc %s: %d syscalls probed: %v", b.Host().Own.runsc.version, len(with), counts)
	if len(pol.unimplemented) > 0 {
		t.Logf("allowed by the policy, not implemented by this runsc (ENOSYS): %v", pol.unimplemented)
	}
	for _, n := range []string{"select", "pselect6", "poll", "ppoll", "epoll_pwait", "statx", "newfstatat", "openat"} {
		if with[n] == "EPERM" {
			t.Errorf("%s is denied", n)
		}
	}
}
