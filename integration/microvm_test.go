package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/testutil"
)

var (
	guestOnce sync.Once
	guestBin  string
	guestErr  error
)

// requireMicroVM returns the environment that makes the microvm backend
// usable (its VM init, built once), or skips (fails under
// EXECBOX_REQUIRE=microvm) where QEMU or root is missing. Without that
// environment the other tests' execbox has no microvm.
func requireMicroVM(t *testing.T) []string {
	t.Helper()
	requireNative(t)
	testutil.RequiresRoot(t, "microvm")
	testutil.RequiresBinary(t, "microvm", "qemu-system-x86_64")
	guestOnce.Do(func() {
		dir, err := os.MkdirTemp("", "execbox-integration-guest-")
		if err != nil {
			guestErr = err
			return
		}
		guestBin = filepath.Join(dir, "execbox-guest")
		cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", guestBin, "../cmd/execbox-guest")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			guestErr = &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: out}
		}
	})
	if guestErr != nil {
		t.Fatalf("building execbox-guest: %v", guestErr)
	}
	// One image cache for every test server (each has a state dir of its
	// own): the guest kernel is unpacked once.
	return []string{"EXECBOX_MICROVM_GUEST=" + guestBin, "EXECBOX_MICROVM_CACHE=/var/cache/execbox/microvm"}
}

// From the CLI: --backend microvm runs in a guest kernel; the strict tier
// may run there; doctor says what runs the VMs and, under emulation, why
// not KVM, and auto then never picks the microVM.
// Each test's body is its subtest "microvm", as in the tests run on
// every backend: scripts/test.sh runs the microvm cases in a stage of
// their own, alone on the machine (beside the others a VM's start under
// emulation once took 35 s, past the agent's deadline).
func TestMicroVMFromTheCLI(t *testing.T) { t.Run("microvm", microVMFromTheCLI) }

func microVMFromTheCLI(t *testing.T) {
	env := requireMicroVM(t)
	var host unix.Utsname
	unix.Uname(&host)
	hostRelease := unix.ByteSliceToString(host.Release[:])
	var res struct{ Backend, Isolation, Stdout, Reason string }
	r := execbox(t, env, "", "run", "--backend", "microvm", "--json", "--", "uname", "-r")
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Backend != "microvm" || res.Isolation != "vm" || res.Reason != "exited" {
		t.Fatalf("--backend microvm: %+v (%v): %s", res, err, r.stderr)
	}
	if got := strings.TrimSpace(res.Stdout); got == "" || got == hostRelease {
		t.Fatalf("kernel in the VM %q, host %q", got, hostRelease)
	}

	var rep struct {
		Candidates []struct {
			Name, Reason string
			Available    bool
			Ready        bool
		}
	}
	d := execbox(t, env, "", "doctor", "--json")
	if err := json.Unmarshal([]byte(d.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v: %s %s", err, d.stdout, d.stderr)
	}
	var reason string
	for _, c := range rep.Candidates {
		if c.Name == "microvm" {
			if !c.Available || !c.Ready {
				t.Fatalf("doctor: microvm %+v", c)
			}
			reason = c.Reason
		}
	}
	t.Logf("doctor: microvm: %s", reason)
	emulated := strings.Contains(reason, "software emulation")
	if emulated && !strings.Contains(reason, "KVM not used: ") {
		t.Fatalf("doctor does not say why not KVM: %s", reason)
	}
	if !emulated && !strings.HasPrefix(reason, "KVM") {
		t.Fatalf("doctor names neither KVM nor emulation: %s", reason)
	}

	r = execbox(t, env, "", "run", "--tier", "strict", "--json", "--", "true")
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Backend != "microvm" {
		t.Fatalf("tier strict with microvm ready ran on %+v (%v): %s", res, err, r.stderr)
	}
	r = execbox(t, env, "", "run", "--json", "--", "true")
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || (emulated && res.Backend == "microvm") {
		t.Fatalf("auto under emulation ran on %+v (%v): %s", res, err, r.stderr)
	}
}

// A kill -9 of the server with VMs running (a session's and a warm one),
// then a restart: no QEMU, cgroup, dir or mount of the killed server is
// left.
func TestMicroVMAfterKill9(t *testing.T) { t.Run("microvm", microVMAfterKill9) }

func microVMAfterKill9(t *testing.T) {
	env := requireMicroVM(t)
	work := filepath.Join(t.TempDir(), "work")
	env = append(env, "EXECBOX_BACKEND=microvm", "EXECBOX_STATE_DIR="+t.TempDir(), "EXECBOX_WORK_ROOT="+work)
	s := startServer(t, env)
	c := s.client("")
	ctx := context.Background()
	sess, err := c.CreateSession(ctx, &v1.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Exec(ctx, sess.ID, &v1.SessionExec{Command: []string{"echo", "in a vm"}}); err != nil || res.Stdout != "in a vm\n" {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	if len(alive(work)) == 0 {
		t.Fatal("no QEMU of the server is seen; the check is blind")
	}
	pid := s.cmd.Process.Pid
	if len(leftoversOf(t, pid, work)) == 0 {
		t.Fatal("a live server with a VM shows nothing on the host; the check is blind")
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s2 := startServer(t, env)
	noneLeft(t, "after a restart, the killed server's VMs", func() []string {
		return append(leftoversOf(t, pid, work), aliveOf(alive(work), s2.cmd.Process.Pid)...)
	})
}

// aliveOf drops from procs (alive's lines) the processes whose parent is
// pid: the new server's own VMs.
func aliveOf(procs []string, pid int) []string {
	var out []string
	for _, p := range procs {
		id, _, _ := strings.Cut(p, ":")
		st, err := os.ReadFile("/proc/" + id + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			continue
		}
		out = append(out, p)
	}
	return out
}
