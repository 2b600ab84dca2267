package docker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
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

// TestContainerConfig inspects a live sandbox's container: exactly the
// hardening of seed 004 plus the hole fixes, the labels, and no host mount.
func TestContainerConfig(t *testing.T) {
	b := newBackend(t, Config{})
	sb := create(t, b, sandbox.Spec{Labels: map[string]string{"team": "a", LabelInstance: "forged"}})
	c := sb.(*Sandbox).c
	in, err := b.cli.ContainerInspect(context.Background(), c.id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ic := in.Container
	hc := ic.HostConfig
	l := sandbox.Limits{}.WithDefaults(b.defaults)
	profile, err := seccompProfile()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(strings.TrimPrefix(ic.Name, "/"), "execbox-") {
		t.Errorf("name %q, want execbox-<id>", ic.Name)
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"network none", hc.NetworkMode == "none"},
		{"read-only root", hc.ReadonlyRootfs},
		{"cap-drop ALL", slices.Equal(hc.CapDrop, []string{"ALL"}) && len(hc.CapAdd) == 0},
		{"no-new-privileges", slices.Contains(hc.SecurityOpt, "no-new-privileges:true")},
		{"our seccomp profile (an allowlist without io_uring)", slices.ContainsFunc(hc.SecurityOpt, func(s string) bool {
			return s == "seccomp="+string(profile) && !strings.Contains(s, "io_uring") &&
				strings.Contains(s, `"defaultAction": "SCMP_ACT_ERRNO"`)
		})},
		{"pids limit", hc.PidsLimit != nil && *hc.PidsLimit == int64(l.Pids+keeperPids)},
		{"memory = memory-swap", hc.Memory == l.Memory && hc.MemorySwap == l.Memory},
		{"cpus", hc.NanoCPUs == int64(l.CPUs*1e9)},
		{"user 65534:65534", ic.Config.User == "65534:65534"},
		{"/tmp tmpfs", strings.Contains(hc.Tmpfs["/tmp"], "noexec") && strings.Contains(hc.Tmpfs["/tmp"], "nosuid") &&
			strings.Contains(hc.Tmpfs["/tmp"], "mode=1777") && strings.Contains(hc.Tmpfs["/tmp"], "size="+strconv.FormatInt(l.TmpSize, 10))},
		{"log driver none", hc.LogConfig.Type == "none"},
		{"no binds", len(hc.Binds) == 0 && len(hc.VolumesFrom) == 0 && !hc.Privileged},
		{"small /dev/shm", hc.ShmSize == shmSize},
		{"private ipc", hc.IpcMode == "private"},
		{"nofile ulimit", slices.ContainsFunc(hc.Ulimits, func(u *container.Ulimit) bool {
			return u.Name == "nofile" && u.Soft == int64(l.NoFile) && u.Hard == int64(l.NoFile)
		})},
		{"label instance", ic.Config.Labels[LabelInstance] == b.instance},
		{"label run", ic.Config.Labels[LabelRun] == sb.ID()},
		{"label owner", ic.Config.Labels[LabelOwner] == b.me.String()},
		{"label spec", ic.Config.Labels["team"] == "a"},
	}
	exp, err := time.Parse(time.RFC3339, ic.Config.Labels[LabelExpires])
	checks = append(checks, struct {
		what string
		ok   bool
	}{"label expires", err == nil && exp.After(time.Now())})
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: not as wanted", c.what)
		}
	}
	// The only mounts besides the engine's own /etc files: the /work volume
	// and /tmp; never the docker socket or a host directory.
	for _, m := range ic.Mounts {
		if m.Type == "bind" || strings.Contains(m.Source, "docker.sock") {
			t.Errorf("host mount %+v", m)
		}
		if m.Destination == workDir && m.Type != "volume" {
			t.Errorf("/work is %s, want a volume", m.Type)
		}
	}
	// And from the inside.
	res, err := sb.Exec(context.Background(), &sandbox.Process{Args: []string{"/bin/sh", "-c",
		`grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; cat /proc/mounts`}})
	if err != nil || !res.Succeeded() {
		t.Fatalf("%v %s", err, describe(res))
	}
	for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("missing %q in:\n%s", want, res.Stdout)
		}
	}
	for _, line := range strings.Split(res.Stdout, "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[1] == "/" && !strings.Contains(","+f[3]+",", ",ro,") {
			t.Errorf("root is not read-only: %s", line)
		}
		if len(f) > 3 && f[1] == "/work" && (f[2] != "tmpfs" || !strings.Contains(f[3], "nosuid") || !strings.Contains(f[3], "noexec")) {
			t.Errorf("/work: %s", line)
		}
	}
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
		{"file_size/past", sandbox.Limits{FileSize: 2 * mib}, write("/work/f", 3*mib), reason(sandbox.ReasonFileSizeLimit)},
		{"pids/inside", sandbox.Limits{Pids: 16}, `for i in $(seq 10); do sleep 5 & done; echo started`, ok},
		{"pids/past", sandbox.Limits{Pids: 16}, `for i in $(seq 30); do sleep 5 & done 2>&1; echo done`,
			func(r *sandbox.Result) bool { return strings.Contains(r.Stdout+r.Stderr, "fork") }},
		{"memory/inside", sandbox.Limits{Memory: 64 * mib}, `python3 -c 'b = bytearray(24 << 20); print(len(b))'`, ok},
		{"memory/past", sandbox.Limits{Memory: 64 * mib}, `python3 -c 'b = bytearray(200 << 20); print(len(b))'`, reason(sandbox.ReasonMemoryLimit)},
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

func TestProgramErrors(t *testing.T) {
	b := newBackend(t, Config{})
	sb := create(t, b, sandbox.Spec{})
	ctx := context.Background()
	_, err := sb.Exec(ctx, &sandbox.Process{Args: []string{"no-such-program-xyz"}})
	if sandbox.CodeOf(err) != "program_not_found" {
		t.Errorf("missing program: %v", err)
	}
	_, err = sb.Exec(ctx, &sandbox.Process{Args: []string{"/bin/true"}, Dir: "nope"})
	if sandbox.CodeOf(err) != "dir_not_found" {
		t.Errorf("missing dir: %v", err)
	}
	// A program that exits 127 by itself is a result, not an error.
	res, err := sb.Exec(ctx, &sandbox.Process{Args: []string{"/bin/sh", "-c", "echo execbox-x: not found >&2; exit 127"}})
	if err != nil || res.ExitCode != 127 {
		t.Errorf("exit 127: %v %s", err, describe(res))
	}
}

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
