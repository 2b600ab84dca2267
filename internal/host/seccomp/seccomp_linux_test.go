package seccomp

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-seccomp-bpf/arch"
	"github.com/execbox/execbox/internal/testutil"
	moby "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// required reports whether EXECBOX_REQUIRE names a backend or feature that
// needs this package, so a missing prerequisite fails instead of skipping.
func required() bool {
	for _, f := range strings.FieldsFunc(os.Getenv("EXECBOX_REQUIRE"), func(r rune) bool { return r == ',' || r == ' ' }) {
		if f == "native" || f == "bwrap" || f == "seccomp" {
			return true
		}
	}
	return false
}

func skipUnlessRequired(t *testing.T, format string, args ...any) {
	t.Helper()
	if required() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

func mustCompile(t *testing.T) *compiled {
	t.Helper()
	if _, _, err := nativeArch(); err != nil {
		skipUnlessRequired(t, "%v", err)
	}
	c, err := compile()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mustAllow are syscalls CPython, Node and the Go runtime use all the time.
var mustAllow = []string{
	"read", "write", "openat", "close", "fstat", "newfstatat", "statx", "lseek", "mmap", "mprotect",
	"munmap", "brk", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "ioctl", "pread64", "readv",
	"writev", "access", "pipe2", "poll", "ppoll", "dup", "dup3", "getpid", "gettid", "getuid",
	"geteuid", "getcwd", "readlink", "futex", "set_robust_list", "set_tid_address", "rseq",
	"prlimit64", "getrandom", "execve", "exit", "exit_group", "wait4", "waitid", "kill", "tgkill",
	"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "eventfd2", "madvise", "mremap",
	"sched_getaffinity", "sched_yield", "sigaltstack", "clock_gettime", "clock_nanosleep",
	"nanosleep", "uname", "fcntl", "getdents64", "socketpair", "connect", "memfd_create", "mkdirat",
	"unlinkat", "renameat2", "statfs", "sysinfo", "getrusage", "prctl", "pidfd_open",
	"pidfd_send_signal", "close_range", "faccessat2", "membarrier", "capget",
}

// mustBlock is execbox's list of syscalls a sandboxed program never gets.
var mustBlock = []string{
	"unshare", "setns", "clone3", "mount", "umount2", "pivot_root", "chroot", "ptrace",
	"process_vm_readv", "process_vm_writev", "init_module", "finit_module", "delete_module",
	"kexec_load", "kexec_file_load", "add_key", "request_key", "keyctl", "bpf", "perf_event_open",
	"userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "open_by_handle_at",
	"name_to_handle_at", "fsopen", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
	"swapon", "swapoff", "reboot", "acct", "settimeofday", "clock_settime", "adjtimex", "syslog",
	"quotactl", "lookup_dcookie", "vm86",
}

func TestPolicyShape(t *testing.T) {
	c := mustCompile(t)
	allowed := allowedNames(c.policy)
	t.Logf("allowed syscalls: %d (%d BPF instructions)", len(allowed), len(c.prog))

	info, _, _ := nativeArch()
	for _, n := range mustAllow {
		if _, onArch := info.SyscallNames[n]; onArch && !slices.Contains(allowed, n) {
			t.Errorf("%s is not allowed; normal programs need it", n)
		}
	}
	if info == arch.X86_64 && !slices.Contains(allowed, "arch_prctl") {
		t.Error("arch_prctl is not allowed on x86_64")
	}
	for _, n := range Blocked() {
		if slices.Contains(allowed, n) {
			t.Errorf("blocked syscall %s is allowed", n)
		}
	}
	for _, n := range mustBlock {
		if !slices.Contains(Blocked(), n) {
			t.Errorf("Blocked() lacks %s", n)
		}
	}
	// Docker's capability-conditional entries must not leak in.
	for _, sc := range moby.DefaultProfile().Syscalls {
		if sc.Includes == nil || len(sc.Includes.Caps) == 0 {
			continue
		}
		for _, n := range sc.Names {
			if slices.Contains(allowed, n) && n != sysClone { // clone: ours, conditional
				t.Errorf("%s needs %v in Docker's profile but is allowed", n, sc.Includes.Caps)
			}
		}
	}
}

// TestBlockedDiffersFromDocker shows Blocked does work: Docker lets a process
// without capabilities make these calls, the policy does not.
func TestBlockedDiffersFromDocker(t *testing.T) {
	c := mustCompile(t)
	docker, err := moby.GetDefaultProfile(&specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
	if err != nil {
		t.Fatal(err)
	}
	dockerAllowed := allowedNames(docker)
	ours := allowedNames(c.policy)
	for _, n := range []string{"adjtimex", "name_to_handle_at", "ptrace", "process_vm_readv", "process_vm_writev", "clock_adjtime"} {
		if !slices.Contains(dockerAllowed, n) {
			t.Errorf("expected Docker's profile to allow %s without capabilities", n)
		}
		if slices.Contains(ours, n) {
			t.Errorf("%s is allowed", n)
		}
	}
}

func TestBytes(t *testing.T) {
	mustCompile(t)
	prog, err := Program()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 8*len(prog) {
		t.Fatalf("len(Bytes()) = %d, want 8*%d", len(b), len(prog))
	}
	for i, f := range prog {
		got := unix.SockFilter{
			Code: binary.LittleEndian.Uint16(b[8*i:]), Jt: b[8*i+2], Jf: b[8*i+3],
			K: binary.LittleEndian.Uint32(b[8*i+4:]),
		}
		if got != f {
			t.Fatalf("instruction %d: bytes decode to %+v, want %+v", i, got, f)
		}
	}
	// The caller owns the copy.
	prog[0].K = 0xdead
	again, _ := Program()
	if again[0].K == 0xdead {
		t.Fatal("Program returned the cached slice")
	}
}

func TestDockerProfile(t *testing.T) {
	c := mustCompile(t)
	b, err := DockerProfile()
	if err != nil {
		t.Fatal(err)
	}
	var p specs.LinuxSeccomp
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("DockerProfile is not valid JSON: %v", err)
	}
	if p.DefaultAction != specs.ActErrno || p.DefaultErrnoRet == nil || *p.DefaultErrnoRet != uint(unix.EPERM) {
		t.Errorf("default action %s errno %v, want SCMP_ACT_ERRNO EPERM", p.DefaultAction, p.DefaultErrnoRet)
	}
	_, ociArch, _ := nativeArch()
	if !reflect.DeepEqual(p.Architectures, []specs.Arch{ociArch}) {
		t.Errorf("architectures %v, want only %s", p.Architectures, ociArch)
	}
	allowed := allowedNames(&p)
	if slices.Contains(allowed, "io_uring_setup") {
		t.Error("io_uring_setup is allowed")
	}
	if !reflect.DeepEqual(allowed, allowedNames(c.policy)) {
		t.Error("the JSON profile allows other syscalls than the BPF program")
	}
	var clone3 *specs.LinuxSyscall
	for i, sc := range p.Syscalls {
		if slices.Contains(sc.Names, "clone3") {
			clone3 = &p.Syscalls[i]
		}
	}
	if clone3 == nil || clone3.Action != specs.ActErrno || clone3.ErrnoRet == nil || *clone3.ErrnoRet != uint(unix.ENOSYS) {
		t.Errorf("clone3 rule %+v, want errno ENOSYS", clone3)
	}

	// Docker's own loader must accept it unchanged.
	loaded, err := moby.LoadProfile(string(b), &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
	if err != nil {
		t.Fatalf("Docker's loader rejects the profile: %v", err)
	}
	if len(loaded.Syscalls) != len(p.Syscalls) || !reflect.DeepEqual(allowedNames(loaded), allowed) {
		t.Error("Docker's loader changed the profile")
	}
}

// seccompData lays out struct seccomp_data for x/net/bpf's VM, whose 32-bit
// loads are big-endian: each native (little-endian) word is stored so that
// the VM reads back the value the kernel would.
func seccompData(nr uint32, auditArch uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], auditArch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(b[20+8*i:], uint32(a>>32))
	}
	return b
}

// TestProgramDecisions runs the assembled program in a BPF interpreter for
// every syscall of the architecture and for the argument-checked ones.
func TestProgramDecisions(t *testing.T) {
	c := mustCompile(t)
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the interpreter layout assumes a little-endian host")
	}
	info, _, _ := nativeArch()
	vm, err := bpf.NewVM(c.insts)
	if err != nil {
		t.Fatal(err)
	}
	run := func(in []byte) uint32 {
		t.Helper()
		r, err := vm.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(r)
	}
	nr := func(name string) uint32 { return uint32(info.SyscallNames[name]) }

	unconditional := c.policy.Syscalls[0].Names
	conditional := []string{"clone", "personality", "socket"}
	counts := map[uint32]int{}
	for name, n := range info.SyscallNames {
		if slices.Contains(conditional, name) {
			continue
		}
		want := retEPERM
		switch {
		case name == "clone3":
			want = retENOSYS
		case slices.Contains(unconditional, name):
			want = retAllow
		}
		got := run(seccompData(uint32(n), uint32(info.ID)))
		counts[got]++
		if got != want {
			t.Errorf("%s (%d): action %#x, want %#x", name, n, got, want)
		}
	}
	t.Logf("decisions over %d syscalls: %d allow, %d EPERM, %d ENOSYS (+3 argument-checked)",
		len(info.SyscallNames)-len(conditional), counts[retAllow], counts[retEPERM], counts[retENOSYS])
	if counts[retAllow] < 250 || counts[retEPERM] < 40 {
		t.Errorf("implausible split: %v", counts)
	}

	cases := []struct {
		name string
		nr   uint32
		arch uint32
		args []uint64
		want uint32
	}{
		{"unknown syscall 1000", 1000, uint32(info.ID), nil, retEPERM},
		{"thread clone", nr("clone"), uint32(info.ID), []uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID}, retAllow},
		{"fork", nr("clone"), uint32(info.ID), []uint64{uint64(unix.SIGCHLD)}, retAllow},
		{"vfork+pidfd", nr("clone"), uint32(info.ID), []uint64{unix.CLONE_VM | unix.CLONE_VFORK | unix.CLONE_PIDFD | uint64(unix.SIGCHLD)}, retAllow},
		{"clone with high bits and no CLONE_NEW*", nr("clone"), uint32(info.ID), []uint64{1<<40 | uint64(unix.SIGCHLD)}, retAllow},
		{"personality(PER_LINUX)", nr("personality"), uint32(info.ID), []uint64{0}, retAllow},
		{"personality(query)", nr("personality"), uint32(info.ID), []uint64{0xffffffff}, retAllow},
		{"personality(ADDR_NO_RANDOMIZE)", nr("personality"), uint32(info.ID), []uint64{addrNoRandomize}, retEPERM},
		{"personality(READ_IMPLIES_EXEC)", nr("personality"), uint32(info.ID), []uint64{readImpliesExec}, retEPERM},
		{"personality(PER_LINUX) with high bits", nr("personality"), uint32(info.ID), []uint64{1 << 32}, retEPERM},
		{"socket(AF_UNIX)", nr("socket"), uint32(info.ID), []uint64{unix.AF_UNIX}, retAllow},
		{"socket(AF_INET6)", nr("socket"), uint32(info.ID), []uint64{unix.AF_INET6}, retAllow},
		{"socket(AF_NETLINK)", nr("socket"), uint32(info.ID), []uint64{unix.AF_NETLINK}, retAllow},
		{"socket(AF_ALG)", nr("socket"), uint32(info.ID), []uint64{unix.AF_ALG}, retEPERM},
		{"socket(AF_VSOCK)", nr("socket"), uint32(info.ID), []uint64{unix.AF_VSOCK}, retEPERM},
		{"read with a foreign audit arch", nr("read"), uint32(arch.I386.ID), nil, retEPERM},
		{"read with audit arch 0", nr("read"), 0, nil, retEPERM},
	}
	for _, f := range []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP, unix.CLONE_NEWTIME} {
		cases = append(cases, struct {
			name string
			nr   uint32
			arch uint32
			args []uint64
			want uint32
		}{"clone " + strconv.FormatUint(f, 16), nr("clone"), uint32(info.ID), []uint64{f | unix.CLONE_VM | uint64(unix.SIGCHLD)}, retEPERM})
	}
	if info == arch.X86_64 {
		cases = append(cases, struct {
			name string
			nr   uint32
			arch uint32
			args []uint64
			want uint32
		}{"x32 read", uint32(arch.X32.SeccompMask), uint32(info.ID), nil, retENOSYS})
	}
	for _, tc := range cases {
		if got := run(seccompData(tc.nr, tc.arch, tc.args...)); got != tc.want {
			t.Errorf("%s: action %#x, want %#x", tc.name, got, tc.want)
		}
	}
}

// seccompAvailable probes the kernel: a seccomp-capable kernel reports the
// mode of every task in /proc.
func seccompAvailable() bool {
	b, err := os.ReadFile("/proc/self/status")
	return err == nil && bytes.Contains(b, []byte("\nSeccomp:"))
}

func hasCapSysAdmin() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<unix.CAP_SYS_ADMIN) != 0
		}
	}
	return false
}

func runVictim(t *testing.T, mode string) victimReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), victimEnv+"="+mode)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s victim: %v\n%s", mode, err, stderr.Bytes())
	}
	var rep victimReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%s victim: bad report %q: %v", mode, out, err)
	}
	return rep
}

// TestVictim installs the filter in a child process and tries what a
// sandboxed program might. A control child runs the same probes without the
// filter, so each denial is shown to come from the filter.
func TestVictim(t *testing.T) {
	mustCompile(t)
	if !seccompAvailable() {
		skipUnlessRequired(t, "seccomp is not available")
	}
	filtered := runVictim(t, "filtered")
	if filtered.Install != "OK" {
		t.Fatalf("Install: %s", filtered.Install)
	}

	denied := map[string]string{
		"old thread: unshare(CLONE_NEWUTS)": "EPERM",
		"unshare(CLONE_NEWUSER)":            "EPERM",
		"unshare(CLONE_NEWNS)":              "EPERM",
		"mount(tmpfs)":                      "EPERM",
		"ptrace(PTRACE_SEIZE, parent)":      "EPERM",
		"ptrace(PTRACE_ATTACH, child)":      "EPERM",
		"process_vm_readv(parent)":          "EPERM",
		"keyctl(KEYCTL_GET_KEYRING_ID)":     "EPERM",
		"add_key(user)":                     "EPERM",
		"bpf(BPF_MAP_CREATE)":               "EPERM",
		"io_uring_setup(8)":                 "EPERM",
		"userfaultfd(O_CLOEXEC)":            "EPERM",
		"perf_event_open(cpu-clock)":        "EPERM",
		"clone3(NULL, 0)":                   "ENOSYS",
		"personality(ADDR_NO_RANDOMIZE)":    "EPERM",
		"socket(AF_VSOCK)":                  "EPERM",
		"socket(AF_ALG)":                    "EPERM",
	}
	for _, f := range []string{"NEWNS", "NEWUTS", "NEWIPC", "NEWUSER", "NEWPID", "NEWNET", "NEWCGROUP"} {
		denied["clone(CLONE_"+f+"|CLONE_THREAD)"] = "EPERM"
	}
	info, _, _ := nativeArch()
	for _, n := range blocked {
		if _, ok := info.SyscallNames[n]; ok {
			denied["blocked "+n] = "EPERM"
		}
	}
	denied["blocked clone3"] = "ENOSYS"
	allowed := map[string]string{
		"getpid":                                "OK",
		"open/write/read":                       "OK",
		"clone(CLONE_THREAD) passes the filter": "EINVAL",
		"threads":                               "OK",
		"pipe2+epoll+eventfd":                   "OK",
		"mmap":                                  "OK",
		"personality(query)":                    "OK",
		"socket(AF_INET)":                       "OK",
		"socket(AF_UNIX)":                       "OK",
		"fork+exec /bin/true":                   "OK",
	}
	for name, want := range denied {
		if got := filtered.Probes[name]; got != want {
			t.Errorf("filtered %s = %q, want %s", name, got, want)
		}
	}
	for name, want := range allowed {
		if got := filtered.Probes[name]; got != want {
			t.Errorf("filtered %s = %q, want %s", name, got, want)
		}
	}
	if len(filtered.Probes) != len(denied)+len(allowed) {
		t.Errorf("victim ran %d probes, the test checks %d", len(filtered.Probes), len(denied)+len(allowed))
	}
	if len(filtered.Threads) < 2 {
		t.Errorf("victim had %d threads; TSYNC was not exercised", len(filtered.Threads))
	}
	for _, th := range filtered.Threads {
		if f := strings.Fields(th); len(f) != 3 || !slices.Contains(f, "Seccomp=2") || !slices.Contains(f, "NoNewPrivs=1") {
			t.Errorf("thread %q: want seccomp mode 2 and no_new_privs 1", th)
		}
	}

	t.Run("python", func(t *testing.T) {
		if filtered.Python == "missing" {
			skipUnlessRequired(t, "/usr/bin/python3 is missing")
		}
		want := `{"unshare": [-1, 1], "threads": 8, "seccomp": "2", "nnp": "1"}`
		if filtered.Python != want {
			t.Errorf("python3 under the filter printed %q, want %q", filtered.Python, want)
		}
	})
	t.Run("node", func(t *testing.T) {
		if filtered.Node == "missing" {
			skipUnlessRequired(t, "/usr/bin/node is missing")
		}
		want := `{"worker":42,"seccomp":"2","nnp":"1"}`
		if filtered.Node != want {
			t.Errorf("node under the filter printed %q, want %q", filtered.Node, want)
		}
	})

	t.Run("control", func(t *testing.T) {
		if !hasCapSysAdmin() {
			testutil.SkipOrFail(t, "root", "without CAP_SYS_ADMIN the kernel itself answers EPERM to many probes")
		}
		control := runVictim(t, "control")
		for name, want := range denied {
			if got := control.Probes[name]; got == want {
				t.Errorf("unfiltered %s also gives %s: the probe proves nothing", name, got)
			}
		}
		for name, want := range allowed {
			if got := control.Probes[name]; got != want {
				t.Errorf("unfiltered %s = %q, want %s", name, got, want)
			}
		}
	})
}

// TestBwrap hands Bytes to a real `bwrap --seccomp FD`, the bwrap backend's
// path, and checks the filter from inside the sandboxed program.
func TestBwrap(t *testing.T) {
	mustCompile(t)
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		if strings.Contains(os.Getenv("EXECBOX_REQUIRE"), "bwrap") {
			t.Fatal("bwrap is missing")
		}
		t.Skip("bwrap is missing")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		skipUnlessRequired(t, "/usr/bin/python3 is missing")
	}
	b, err := Bytes()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		w.Write(b)
		w.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// /usr and /etc only, not the host's whole tree: a recursive bind of /
	// races with mounts other tests make and remove meanwhile (a docker
	// container's overlay), which bwrap then fails to remount read-only.
	cmd := exec.CommandContext(ctx, bwrap, "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
		"--proc", "/proc", "--dev", "/dev",
		"--unshare-pid", "--die-with-parent", "--seccomp", "3", "/usr/bin/python3", "-c", pythonScript)
	cmd.ExtraFiles = []*os.File{r} // fd 3
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "No permissions to create new namespace") || strings.Contains(string(out), "Operation not permitted") {
			skipUnlessRequired(t, "bwrap cannot create namespaces here: %s", out)
		}
		t.Fatalf("bwrap: %v: %s", err, out)
	}
	// unshare fails with EPERM from inside; NoNewPrivs is set by bwrap.
	want := `{"unshare": [-1, 1], "threads": 8, "seccomp": "2", "nnp": "1"}`
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("python3 under bwrap --seccomp printed %q, want %q", got, want)
	}
}

// TestRuncProfile runs python3 in a real runc container whose
// linux.seccomp is DockerProfile, so libseccomp (what Docker uses) compiles
// and enforces the JSON form.
func TestRuncProfile(t *testing.T) {
	mustCompile(t)
	runc, err := exec.LookPath("runc")
	if err != nil || os.Geteuid() != 0 {
		if strings.Contains(os.Getenv("EXECBOX_REQUIRE"), "docker") {
			t.Fatalf("runc as root is needed: %v", err)
		}
		t.Skip("needs runc and root")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		skipUnlessRequired(t, "/usr/bin/python3 is missing")
	}
	profile, err := DockerProfile()
	if err != nil {
		t.Fatal(err)
	}
	var sec specs.LinuxSeccomp
	if err := json.Unmarshal(profile, &sec); err != nil {
		t.Fatal(err)
	}

	bundle := t.TempDir()
	rootfs := filepath.Join(bundle, "rootfs")
	for _, d := range []string{"usr", "proc", "dev", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Debian's merged /usr: the rest of the tree is symlinks into it.
	for _, l := range []string{"bin", "lib", "lib64", "sbin"} {
		if target, err := os.Readlink("/" + l); err == nil {
			os.Symlink(target, filepath.Join(rootfs, l))
		}
	}
	caps := []string{"CAP_KILL"}
	spec := specs.Spec{
		Version: specs.Version,
		Root:    &specs.Root{Path: rootfs, Readonly: true},
		Process: &specs.Process{
			Args:            []string{"/usr/bin/python3", "-c", pythonScript},
			Cwd:             "/",
			Env:             []string{"PATH=/usr/bin"},
			NoNewPrivileges: true,
			Capabilities:    &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev"}},
			{Destination: "/usr", Type: "bind", Source: "/usr", Options: []string{"rbind", "ro"}},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{{Type: "pid"}, {Type: "mount"}, {Type: "ipc"}, {Type: "uts"}, {Type: "network"}},
			Seccomp:    &sec,
		},
	}
	cfg, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := fmt.Sprintf("execbox-seccomp-test-%d", os.Getpid())
	state := filepath.Join(bundle, "state")
	cmd := exec.CommandContext(ctx, runc, "--root", state, "run", "--bundle", bundle, id)
	out, err := cmd.CombinedOutput()
	exec.Command(runc, "--root", state, "delete", "--force", id).Run()
	if err != nil {
		t.Fatalf("runc run: %v: %s", err, out)
	}
	want := `{"unshare": [-1, 1], "threads": 8, "seccomp": "2", "nnp": "1"}`
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("python3 under runc with DockerProfile printed %q, want %q", got, want)
	}
}
