package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// TestSeed004 runs seed 004's four checks inside a one-shot container:
// uid 65534, a read-only root, no network, and neither a host secret in the
// environment nor a host file visible.
func TestSeed004(t *testing.T) {
	b := newBackend(t, Config{})
	secretFile := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secretFile, []byte("hunter2-file"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EXECBOX_SEED_SECRET", "hunter2-env")
	res := py(t, b, sandbox.Spec{}, `
import json, os, socket
out = {"uid": os.getuid()}
out["secret_absent"] = ("hunter2-env" not in repr(dict(os.environ))
    and "EXECBOX_SEED_SECRET" not in os.environ
    and not os.path.exists(`+strconv.Quote(secretFile)+`)
    and not any(k.startswith("DOCKER_") for k in os.environ)
    and not os.path.exists("/var/run/docker.sock") and not os.path.exists("/run/docker.sock"))
try:
    open("/usr/execbox-probe", "w")
    out["read_only"] = False
except OSError as e:
    out["read_only"] = e.errno == 30  # EROFS
blocked = True
for addr in [("1.1.1.1", 53), ("8.8.8.8", 443)]:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(addr)
        blocked = False
    except OSError:
        pass
    finally:
        s.close()
out["network_blocked"] = blocked and sorted(os.listdir("/sys/class/net")) == ["lo"]
print(json.dumps(out, sort_keys=True))
`)
	if !res.Succeeded() {
		t.Fatalf("probe failed: %s", describe(res))
	}
	t.Logf("seed 004 checks: %s", strings.TrimSpace(res.Stdout))
	var got map[string]any
	if err := json.Unmarshal([]byte(res.Stdout), &got); err != nil {
		t.Fatalf("decoding %q: %v", res.Stdout, err)
	}
	want := map[string]any{"uid": float64(65534), "secret_absent": true, "read_only": true, "network_blocked": true}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// seedLimits are seed 004's limits: pids 32, memory 256m with swap equal
// to it, 1 CPU, a 16m /tmp.
var seedLimits = sandbox.Limits{Pids: 32, Memory: 256 * sandbox.MiB, CPUs: 1, TmpSize: 16 * sandbox.MiB}

// TestContainerConfig inspects a live sandbox's container, made with seed
// 004's limits, against the values written out here: seed 004's docker run
// flags (--rm --name execbox-<id> --network=none --read-only --cap-drop=ALL
// --security-opt=no-new-privileges --pids-limit=32 --memory=256m
// --memory-swap=256m --cpus=1 --user=65534:65534
// --tmpfs=/tmp:rw,noexec,nosuid,size=16m --log-driver=none -i, no pull, no
// host mount), with execbox's own additions: its seccomp profile, 3 more
// pids for its own processes, nodev and mode 1777 on /tmp, /work a tmpfs
// volume, a 1 MiB /dev/shm, private IPC and cgroup namespaces, ulimits,
// no docker-init, SIGKILL to stop, and the labels.
func TestContainerConfig(t *testing.T) {
	b := newBackend(t, Config{})
	sb := create(t, b, sandbox.Spec{Limits: seedLimits, Labels: map[string]string{"team": "a", LabelInstance: "forged"}})
	c := sb.(*Sandbox).c
	in, err := b.cli.ContainerInspect(context.Background(), c.id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ic := in.Container
	hc, cfg := ic.HostConfig, ic.Config
	f := false
	eq := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", what, got, want)
		}
	}
	// Seed 004's flags.
	eq("--rm", hc.AutoRemove, true)
	eq("--name", ic.Name, "/execbox-"+sb.ID())
	eq("--network", string(hc.NetworkMode), "none")
	eq("--read-only", hc.ReadonlyRootfs, true)
	eq("--cap-drop", hc.CapDrop, []string{"ALL"})
	eq("--cap-add", len(hc.CapAdd), 0)
	eq("--pids-limit (32 + execbox's 3)", *hc.PidsLimit, int64(35))
	eq("--memory", hc.Memory, int64(268435456))
	eq("--memory-swap", hc.MemorySwap, int64(268435456))
	eq("--cpus", hc.NanoCPUs, int64(1000000000))
	eq("--user", cfg.User, "65534:65534")
	eq("--tmpfs", hc.Tmpfs, map[string]string{"/tmp": "rw,nosuid,nodev,noexec,size=16777216,mode=1777"})
	eq("--log-driver", hc.LogConfig.Type, "none")
	eq("-i (stdin open, closed when the attach ends)", []bool{cfg.OpenStdin, cfg.StdinOnce, cfg.AttachStdin}, []bool{true, true, true})
	eq("privileged", hc.Privileged, false)
	eq("binds", len(hc.Binds)+len(hc.VolumesFrom)+len(hc.Devices), 0)
	// execbox's additions.
	var opts []string
	var prof struct {
		DefaultAction string `json:"defaultAction"`
		Syscalls      []struct {
			Names  []string `json:"names"`
			Action string   `json:"action"`
		} `json:"syscalls"`
	}
	for _, o := range hc.SecurityOpt {
		if j, ok := strings.CutPrefix(o, "seccomp="); ok {
			if err := json.Unmarshal([]byte(j), &prof); err != nil {
				t.Errorf("seccomp profile: %v", err)
			}
			o = "seccomp=<profile>"
		}
		opts = append(opts, o)
	}
	eq("--security-opt", opts, []string{"no-new-privileges:true", "seccomp=<profile>"})
	eq("seccomp default action", prof.DefaultAction, "SCMP_ACT_ERRNO")
	allowed := map[string]bool{}
	for _, sc := range prof.Syscalls {
		if sc.Action == "SCMP_ACT_ALLOW" {
			for _, n := range sc.Names {
				allowed[n] = true
			}
		}
	}
	for _, n := range []string{"io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "unshare", "setns",
		"clone3", "mount", "umount2", "pivot_root", "ptrace", "process_vm_readv", "bpf", "perf_event_open", "keyctl",
		"add_key", "open_by_handle_at", "init_module", "finit_module", "kexec_load", "reboot", "swapon"} {
		if allowed[n] {
			t.Errorf("seccomp profile allows %s", n)
		}
	}
	for _, n := range []string{"read", "write", "execve", "exit_group", "futex", "wait4", "kill", "openat"} {
		if !allowed[n] {
			t.Errorf("seccomp profile does not allow %s", n)
		}
	}
	eq("--shm-size", hc.ShmSize, int64(1048576))
	eq("--ipc", string(hc.IpcMode), "private")
	eq("--cgroupns", string(hc.CgroupnsMode), "private")
	eq("--init", hc.Init, &f)
	var ulimits []string
	for _, u := range hc.Ulimits {
		ulimits = append(ulimits, fmt.Sprintf("%s=%d:%d", u.Name, u.Soft, u.Hard))
	}
	eq("--ulimit", ulimits, []string{"nofile=1024:1024", "fsize=67108864:67108864", "cpu=17:18"})
	// The keeper's environment: ours, then the image's ENV, which the
	// engine adds (a program gets neither: env -i).
	img, err := b.cli.ImageInspect(context.Background(), b.cfg.Image)
	if err != nil {
		t.Fatal(err)
	}
	eq("--env", cfg.Env, append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/work", "TMPDIR=/tmp"},
		slices.DeleteFunc(slices.Clone(img.Config.Env), func(kv string) bool {
			return strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "TMPDIR=")
		})...))
	eq("--workdir", cfg.WorkingDir, "/work")
	eq("--entrypoint", len(cfg.Entrypoint), 0)
	eq("--hostname", cfg.Hostname, "sandbox")
	eq("--stop-signal", cfg.StopSignal, "SIGKILL")
	eq("command", cfg.Cmd[:4], []string{"/bin/sh", "-c", keeper, "execbox-keeper"})
	eq("--mount", len(hc.Mounts), 1)
	if len(hc.Mounts) == 1 {
		m := hc.Mounts[0]
		eq("/work mount", []any{string(m.Type), m.Source, m.Target, m.ReadOnly}, []any{"volume", "", "/work", false})
		if m.VolumeOptions == nil || m.VolumeOptions.DriverConfig == nil {
			t.Errorf("/work volume without driver options: %+v", m)
		} else {
			eq("/work volume driver", m.VolumeOptions.DriverConfig.Name, "local")
			eq("/work volume options", m.VolumeOptions.DriverConfig.Options, map[string]string{
				"type": "tmpfs", "device": "tmpfs", "o": "size=67108864,uid=65534,gid=65534,mode=0700,nosuid,nodev,noexec"})
		}
	}
	eq("label team", cfg.Labels["team"], "a")
	eq("label instance (not the forged one)", cfg.Labels[LabelInstance], "test-"+t.Name())
	eq("label run", cfg.Labels[LabelRun], sb.ID())
	eq("label kind", cfg.Labels[LabelKind], "sandbox")
	eq("label owner", cfg.Labels[LabelOwner], b.me.String())
	eq("label backend", cfg.Labels[LabelBackend], b.uid)
	if exp, err := time.Parse(time.RFC3339, cfg.Labels[LabelExpires]); err != nil || exp.Before(time.Now().Add(MaxAge-time.Hour)) {
		t.Errorf("label expires %q: want about %v from now", cfg.Labels[LabelExpires], MaxAge)
	}
	// The only mounts besides the engine's own /etc files: the /work volume
	// and /tmp; never the docker socket or a host directory.
	for _, m := range ic.Mounts {
		if m.Type == "bind" || strings.Contains(m.Source, "docker.sock") {
			t.Errorf("host mount %+v", m)
		}
	}
	// And from the inside.
	res, err := sb.Exec(context.Background(), &sandbox.Process{Args: []string{"/bin/sh", "-c",
		`id; grep -E '^(CapEff|CapPrm|CapBnd|CapInh|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status; cat /proc/mounts`}})
	if err != nil || !res.Succeeded() {
		t.Fatalf("%v %s", err, describe(res))
	}
	for _, want := range []string{"uid=65534(nobody) gid=65534(nogroup) groups=65534(nogroup)\n", "CapInh:\t0000000000000000\n",
		"CapPrm:\t0000000000000000\n", "CapEff:\t0000000000000000\n", "CapBnd:\t0000000000000000\n", "CapAmb:\t0000000000000000\n",
		"NoNewPrivs:\t1\n", "Seccomp:\t2\n"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("missing %q in:\n%s", want, res.Stdout)
		}
	}
	mounts := map[string][]string{}
	for _, line := range strings.Split(res.Stdout, "\n") {
		if f := strings.Fields(line); len(f) > 3 && strings.HasPrefix(f[1], "/") {
			mounts[f[1]] = append([]string{f[2]}, strings.Split(f[3], ",")...)
		}
	}
	has := func(mp string, want ...string) {
		t.Helper()
		got, ok := mounts[mp]
		if !ok {
			t.Errorf("%s is not mounted", mp)
			return
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: %v lacks %s", mp, got, w)
			}
		}
	}
	has("/", "ro")
	has("/tmp", "tmpfs", "rw", "nosuid", "nodev", "noexec", "size=16384k") // mode 1777 is tmpfs's default: not listed
	has("/work", "tmpfs", "rw", "nosuid", "nodev", "noexec", "size=65536k", "mode=700", "uid=65534", "gid=65534")
	has("/dev/shm", "tmpfs", "size=1024k")
}

// TestIoUringBlocked: Docker's own default profile allows io_uring; ours
// answers EPERM.
func TestIoUringBlocked(t *testing.T) {
	b := newBackend(t, Config{})
	res := py(t, b, sandbox.Spec{}, `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
for name, nr in [("io_uring_setup", 425), ("userfaultfd", 323 if os.uname().machine == "x86_64" else 282)]:
    r = libc.syscall(nr, 1, params)
    print(name, r, ctypes.get_errno())
`)
	if !res.Succeeded() {
		t.Fatal(describe(res))
	}
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		if !strings.HasSuffix(line, " -1 1") { // -1, EPERM
			t.Errorf("want -1 EPERM: %s", line)
		}
	}
	t.Logf("%s", res.Stdout)
}

// TestLimitsBothSides checks each limit just inside and past its bound.
func TestLimitsBothSides(t *testing.T) {
	b := newBackend(t, Config{})
	type c struct {
		name   string
		limits sandbox.Limits
		script string
		check  func(*sandbox.Result) bool
	}
	ok := func(r *sandbox.Result) bool { return r.Succeeded() }
	failedWith := func(msg string) func(*sandbox.Result) bool {
		return func(r *sandbox.Result) bool {
			return r.Reason == sandbox.ReasonExited && r.ExitCode != 0 && strings.Contains(r.Stdout+r.Stderr, msg)
		}
	}
	reason := func(want sandbox.Reason) func(*sandbox.Result) bool {
		return func(r *sandbox.Result) bool { return r.Reason == want }
	}
	const mib = sandbox.MiB
	write := func(path string, n int) string {
		return `head -c ` + strconv.Itoa(n) + ` /dev/zero > ` + path + ` && echo written`
	}
	cases := []c{
		{"nofile/default_1024", sandbox.Limits{}, `echo $(ulimit -Sn) $(ulimit -Hn)`,
			func(r *sandbox.Result) bool { return r.Succeeded() && r.Stdout == "1024 1024\n" }},
		{"nofile/inside", sandbox.Limits{NoFile: 64}, `python3 -c 'fs=[open("/dev/null") for _ in range(55)]; print(len(fs))'`, ok},
		{"nofile/past", sandbox.Limits{NoFile: 64}, `python3 -c 'fs=[open("/dev/null") for _ in range(70)]'`, failedWith("Too many open files")},
		{"tmp/writable_by_65534", sandbox.Limits{}, `id -u; stat -c %a /tmp; echo x > /tmp/f && cat /tmp/f`,
			func(r *sandbox.Result) bool { return r.Succeeded() && r.Stdout == "65534\n1777\nx\n" }},
		{"tmp/inside", sandbox.Limits{TmpSize: 4 * mib}, write("/tmp/f", 3*mib), ok},
		{"tmp/past", sandbox.Limits{TmpSize: 4 * mib}, write("/tmp/f", 5*mib), failedWith("No space left")},
		{"tmp/noexec", sandbox.Limits{}, `cp /bin/true /tmp/t && /tmp/t`, failedWith("Permission denied")},
		{"work/inside", sandbox.Limits{WorkSize: 4 * mib}, write("/work/f", 3*mib), ok},
		{"work/past", sandbox.Limits{WorkSize: 4 * mib}, write("/work/f", 5*mib), failedWith("No space left")},
		{"shm/small_ok", sandbox.Limits{}, write("/dev/shm/f", 512*sandbox.KiB), ok},
		{"shm/not_a_64MiB_hole", sandbox.Limits{}, write("/dev/shm/f", 2*mib), failedWith("No space left")},
		{"file_size/inside", sandbox.Limits{FileSize: 2 * mib}, write("/work/f", mib), ok},
		{"file_size/past", sandbox.Limits{FileSize: 2 * mib}, "exec " + write("/work/f", 3*mib), reason(sandbox.ReasonFileSizeLimit)},
		{"file_size/past_in_a_child", sandbox.Limits{FileSize: 2 * mib}, write("/work/f", 3*mib),
			func(r *sandbox.Result) bool { // the shell, which saw its child die of SIGXFSZ, exits 153
				return r.Reason == sandbox.ReasonExited && r.ExitCode == 128+25 && r.Stderr == "File size limit exceeded\n"
			}},
		{"memory/inside", sandbox.Limits{Memory: 64 * mib}, `python3 -c 'b = bytearray(24 << 20); print(len(b))'`, ok},
		{"memory/past", sandbox.Limits{Memory: 64 * mib}, `python3 -c 'b = bytearray(200 << 20); print(len(b))'`, reason(sandbox.ReasonMemoryLimit)},
		{"cpu_time/inside", sandbox.Limits{CPUTime: 3 * time.Second, Wall: 10 * time.Second},
			`python3 -c 'import time
t = time.process_time()
while time.process_time() - t < 1: pass
print("ok")'`, func(r *sandbox.Result) bool { return r.Succeeded() && r.Stdout == "ok\n" }},
		{"cpu_time/past", sandbox.Limits{CPUTime: time.Second, Wall: 10 * time.Second}, `while :; do :; done`, reason(sandbox.ReasonCPULimit)},
		{"cpus/quota", sandbox.Limits{CPUs: 0.5}, `cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us 2>/dev/null || cat /sys/fs/cgroup/cpu.max`,
			func(r *sandbox.Result) bool {
				return r.Succeeded() && (r.Stdout == "50000\n100000\n" || r.Stdout == "50000 100000\n")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := testutil.Sh(t, b, sandbox.Spec{Limits: tc.limits}, tc.script)
			if !tc.check(res) {
				t.Errorf("%s", describe(res))
			}
		})
	}
}

// TestExitCodes: the same rule as a shell and docker run, on both ways a
// program runs (through the keeper, and through an exec when its stdin is
// a stream): 127 and a Message for a program that is not there, 126 for
// one that is not executable, the program's own status otherwise (above
// 128 too), and a signal as Signal with Reason signaled (or the limit it
// stands for), never as 128+N. A missing directory is the caller's error.
func TestExitCodes(t *testing.T) {
	b := newBackend(t, Config{})
	sb := create(t, b, sandbox.Spec{})
	ctx := context.Background()
	cases := []struct {
		args           []string
		reason         sandbox.Reason
		exit           int
		signal, stderr string
		message        string
	}{
		{[]string{"no-such-program-xyz"}, sandbox.ReasonExited, 127, "", "", `program "no-such-program-xyz" not found`},
		{[]string{"/usr/bin/no-such-program"}, sandbox.ReasonExited, 127, "", "", `program "/usr/bin/no-such-program" not found`},
		{[]string{"/etc/passwd"}, sandbox.ReasonExited, 126, "", "", `program "/etc/passwd" is not an executable file`},
		{[]string{"/tmp"}, sandbox.ReasonExited, 126, "", "", `program "/tmp" is not an executable file`},
		{[]string{"/bin/sh", "-c", "echo execbox-x: not found >&2; exit 127"}, sandbox.ReasonExited, 127, "", "execbox-x: not found\n", ""},
		{[]string{"/bin/sh", "-c", "exit 126"}, sandbox.ReasonExited, 126, "", "", ""},
		{[]string{"/bin/sh", "-c", "exit 137"}, sandbox.ReasonExited, 137, "", "", ""},
		{[]string{"/bin/sh", "-c", "exit 255"}, sandbox.ReasonExited, 255, "", "", ""},
		{[]string{"/bin/sh", "-c", "echo Killed >&2; exit 137"}, sandbox.ReasonExited, 137, "", "Killed\n", ""},
		{[]string{"/bin/sh", "-c", "kill -9 $$"}, sandbox.ReasonSignaled, -1, "SIGKILL", "", ""},
		{[]string{"/bin/sh", "-c", "kill -TERM $$"}, sandbox.ReasonSignaled, -1, "SIGTERM", "", ""},
		{[]string{"python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"}, sandbox.ReasonSignaled, -1, "SIGSEGV", "", ""},
		{[]string{"/bin/sh", "-c", "kill -XCPU $$"}, sandbox.ReasonCPULimit, -1, "SIGXCPU", "", ""},
		{[]string{"/bin/sh", "-c", "kill -XFSZ $$"}, sandbox.ReasonFileSizeLimit, -1, "SIGXFSZ", "", ""},
		// A program that kills the shell waiting for it: the status is lost
		// (and the wrapper's shell says how its substitution died).
		{[]string{"/bin/sh", "-c", "kill -9 $PPID; sleep 1"}, sandbox.ReasonSandboxError, -1, "", "Killed\n", "exit status was lost"},
	}
	for _, via := range []string{"keeper", "exec"} {
		for _, c := range cases {
			p := &sandbox.Process{Args: c.args}
			if via == "exec" {
				p.Stdin = onlyReader{strings.NewReader("")}
			}
			res, err := sb.Exec(ctx, p)
			if err != nil {
				t.Errorf("%s %q: %v", via, c.args, err)
				continue
			}
			if res.Reason != c.reason || res.ExitCode != c.exit || res.Signal != c.signal || res.Stderr != c.stderr ||
				!strings.Contains(res.Message, c.message) || (c.message == "") != (res.Message == "") {
				t.Errorf("%s %q: %s; want reason %s exit %d signal %q stderr %q message %q", via, c.args, describe(res), c.reason, c.exit, c.signal, c.stderr, c.message)
			}
		}
	}
	_, err := sb.Exec(ctx, &sandbox.Process{Args: []string{"/bin/true"}, Dir: "nope"})
	if !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != "dir_not_found" {
		t.Errorf("missing dir: %v", err)
	}
}

// onlyReader hides everything of a reader but Read (its length): such a
// stdin goes through an exec.
type onlyReader struct{ io.Reader }

func TestImageMissing(t *testing.T) {
	newBackend(t, Config{}) // the engine must be there
	b := newBackend(t, Config{Image: "execbox-no-such-image:0"})
	h := b.Health(context.Background())
	if !h.Available || h.Ready || !strings.Contains(h.Reason, "execbox-no-such-image:0") {
		t.Errorf("health with a missing image: %+v", h)
	}
	_, err := b.Create(context.Background(), sandbox.Spec{})
	if sandbox.CodeOf(err) != "image_missing" || !strings.Contains(err.Error(), "execbox-no-such-image:0") ||
		!strings.Contains(err.Error(), "execbox image build python --offline") {
		t.Errorf("Create with a missing image: %v", err)
	}
	t.Logf("%v", err)
}

// TestKeeperChannel: what goes down the keeper's channel comes out intact
// on both ways a program runs: arguments and variables with quotes,
// newlines, $( ), backquotes, globs and empty strings; a command line too
// long for the keeper (it goes through an exec); stdin with every byte
// value, through /tmp and as a stream.
func TestKeeperChannel(t *testing.T) {
	b := newBackend(t, Config{})
	sb := create(t, b, sandbox.Spec{})
	ctx := context.Background()
	args := []string{"a b", "it's", `"q"`, "$(id)", "`id`", "$HOME", "line1\nline2\n", `\`, "*", "", "'", "-n", "é€"}
	env := map[string]string{"X": "it's $(id)\n`x` *", "EMPTY": "", "-S": "-i /bin/false"}
	want := strings.Join(args, "|") + "|\n" + env["X"] + "|" + env["EMPTY"] + "|\n"
	script := `for a; do printf '%s|' "$a"; done; echo; printf '%s|%s|\n' "$X" "$EMPTY"`
	long := strings.Repeat("x", maxLine)
	for _, c := range []struct {
		name  string
		args  []string
		stdin io.Reader
		want  string
	}{
		{"keeper", append([]string{"/bin/sh", "-c", script, "sh"}, args...), nil, want},
		{"exec", append([]string{"/bin/sh", "-c", script, "sh"}, args...), onlyReader{strings.NewReader("")}, want},
		{"long_line", []string{"/bin/sh", "-c", `printf '%s' "$1" | wc -c`, "sh", long}, nil, strconv.Itoa(len(long)) + "\n"},
	} {
		res, err := sb.Exec(ctx, &sandbox.Process{Args: c.args, Env: env, Stdin: c.stdin})
		if err != nil || !res.Succeeded() || res.Stdout != c.want {
			t.Errorf("%s: %v %s; want stdout %q", c.name, err, describe(res), c.want)
		}
	}
	in := make([]byte, sandbox.MiB)
	for i := range in {
		in[i] = byte(i * 7)
	}
	for _, c := range []struct {
		name  string
		stdin io.Reader
	}{
		{"stdin_inline_1MiB", bytes.NewReader(in)},
		{"stdin_stream_1MiB", onlyReader{bytes.NewReader(in)}},
		{"stdin_inline_over_the_bound", bytes.NewReader(append(in, 1))},
	} {
		res, err := sb.Exec(ctx, &sandbox.Process{Args: []string{"sha256sum"}, Stdin: c.stdin})
		data := in
		if strings.HasSuffix(c.name, "bound") {
			data = append(in, 1)
		}
		want := fmt.Sprintf("%x  -\n", sha256.Sum256(data))
		if err != nil || !res.Succeeded() || res.Stdout != want {
			t.Errorf("%s: %v %s; want %q", c.name, err, describe(res), want)
		}
	}
	// Nothing of the inline stdin is left in /tmp.
	res := testutil.Exec(t, sb, "/bin/sh", "-c", "ls -A /tmp")
	if !res.Succeeded() || res.Stdout != "" {
		t.Errorf("/tmp after the runs: %s", describe(res))
	}
}

// TestWriteFilesLongPath: a path too long for the archive upload is
// written by a helper, with a small file through the keeper and a large
// one through an exec; both read back intact.
func TestWriteFilesLongPath(t *testing.T) {
	b := newBackend(t, Config{})
	sb := create(t, b, sandbox.Spec{})
	dir := strings.Repeat(strings.Repeat("d", 200)+"/", 11)
	big := bytes.Repeat([]byte("0123456789abcdef"), 10*sandbox.KiB) // 160 KiB
	files := map[string][]byte{dir + "small": []byte("small\n"), dir + "big": big}
	if err := sb.WriteFiles(context.Background(), files); err != nil {
		t.Fatal(err)
	}
	res := testutil.Exec(t, sb, "/bin/sh", "-c", `cd "$1" && cat small && sha256sum < big`, "sh", dir)
	want := fmt.Sprintf("small\n%x  -\n", sha256.Sum256(big))
	if !res.Succeeded() || res.Stdout != want {
		t.Errorf("%s; want %q", describe(res), want)
	}
}

// TestStdinNoRoom: an inline stdin that does not fit in /tmp (a program
// filled it) is an ErrLimit, none of its bytes is taken for a command of
// the keeper's, and the sandbox goes on working.
func TestStdinNoRoom(t *testing.T) {
	b := newBackend(t, Config{})
	sb := create(t, b, sandbox.Spec{Limits: sandbox.Limits{TmpSize: 4 * sandbox.MiB}})
	ctx := context.Background()
	res := testutil.Exec(t, sb, "/bin/sh", "-c", "head -c 4M /dev/zero > /tmp/fill; true")
	testutil.WantOK(t, res)
	// Lines that would be commands, were they read as such.
	in := bytes.Repeat([]byte("r 0000000000000000 0 /bin/sh -c \"$w\" execbox /work /bin/sh -c 'echo INJECTED'\nk x\n"), 4000)
	_, err := sb.Exec(ctx, &sandbox.Process{Args: []string{"cat"}, Stdin: bytes.NewReader(in)})
	if !errors.Is(err, sandbox.ErrLimit) || sandbox.CodeOf(err) != "stdin_no_room" {
		t.Errorf("stdin with no room in /tmp: %v", err)
	}
	res = testutil.Exec(t, sb, "/bin/sh", "-c", "rm /tmp/fill; echo ok")
	if !res.Succeeded() || res.Stdout != "ok\n" || strings.Contains(res.Stdout+res.Stderr, "INJECTED") {
		t.Errorf("after: %s", describe(res))
	}
}

// TestMounts: configured extra mounts (the tools dirs) are bind mounts
// from an engine on this host — read-only unless asked, and checked as on
// every backend; an engine that may be elsewhere refuses them before it is
// asked anything.
func TestMounts(t *testing.T) {
	b := newBackend(t, Config{})
	testutil.ExtraMounts(t, b)
	for _, m := range []sandbox.Mount{
		{Source: "/nonexistent/dir", Target: "/data"},
		{Source: t.TempDir(), Target: "/work/x"},
	} {
		if _, err := b.Create(context.Background(), sandbox.Spec{Policy: sandbox.Policy{Mounts: []sandbox.Mount{m}}}); sandbox.CodeOf(err) != "mount_invalid" {
			t.Errorf("mount %+v: %v, want mount_invalid", m, err)
		}
	}
	far, err := NewWithConfig(Config{Host: "tcp://127.0.0.1:1"}, sandbox.Settings{Instance: "test-far"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = far.Create(context.Background(), sandbox.Spec{Policy: sandbox.Policy{Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: "/data"}}}})
	if sandbox.CodeOf(err) != "mounts_unsupported" {
		t.Errorf("a tcp engine with mounts: %v, want mounts_unsupported", err)
	}
}
