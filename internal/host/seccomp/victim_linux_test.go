package seccomp

// The victim: TestMain re-executes the test binary with victimEnv set; the
// child optionally calls Install and then probes syscalls from the inside,
// printing one JSON object of results to stdout.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

const victimEnv = "EXECBOX_SECCOMP_VICTIM" // "filtered" or "control"

func TestMain(m *testing.M) {
	if mode := os.Getenv(victimEnv); mode != "" {
		os.Exit(victimMain(mode))
	}
	os.Exit(m.Run())
}

// victimReport is what a victim prints.
type victimReport struct {
	Install string            // "OK" or the error Install returned
	Probes  map[string]string // probe name → "OK" or errno name
	Threads []string          // "tid NoNewPrivs=n Seccomp=m" for every thread
	Python  string            // output of the python3 child, or "error: ..."
	Node    string            // output of the node child, or "error: ..."
}

const pythonScript = `
import ctypes, json, os, threading
libc = ctypes.CDLL(None, use_errno=True)
r = libc.unshare(0x10000000)
err = ctypes.get_errno()
out = []
ts = [threading.Thread(target=lambda i=i: out.append(i)) for i in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
print(json.dumps({"unshare": [r, err], "threads": len(out), "seccomp": status["Seccomp"].strip(), "nnp": status["NoNewPrivs"].strip()}))
`

const nodeScript = `
const fs = require("fs");
const { Worker } = require("worker_threads");
const status = Object.fromEntries(fs.readFileSync("/proc/self/status", "utf8").split("\n").filter(l => l.includes(":")).map(l => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 1).trim()]));
const w = new Worker("require('worker_threads').parentPort.postMessage(6*7)", { eval: true });
w.on("message", (v) => { console.log(JSON.stringify({ worker: v, seccomp: status.Seccomp, nnp: status.NoNewPrivs })); w.terminate(); });
`

func victimMain(mode string) int {
	rep := victimReport{Probes: map[string]string{}}
	// A thread that exists before Install and acts after it: TSYNC must
	// have reached it.
	start, done := make(chan struct{}), make(chan string)
	go func() {
		runtime.LockOSThread()
		<-start
		done <- result(unix.Unshare(unix.CLONE_NEWUTS))
	}()

	rep.Install = "OK"
	if mode == "filtered" {
		if err := Install(); err != nil {
			rep.Install = err.Error()
		}
	}
	close(start)
	rep.Probes["old thread: unshare(CLONE_NEWUTS)"] = <-done

	dir, err := os.MkdirTemp("", "seccomp-victim")
	if err != nil {
		rep.Install = "mkdtemp: " + err.Error()
	} else {
		defer os.RemoveAll(dir)
	}
	for name, probe := range probes(dir) {
		rep.Probes[name] = probe()
	}
	rep.Threads = threadStatus()
	rep.Python = runChild("/usr/bin/python3", "-c", pythonScript)
	rep.Node = runChild("/usr/bin/node", "-e", nodeScript)

	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		return 1
	}
	return 0
}

func runChild(path string, args ...string) string {
	if _, err := os.Stat(path); err != nil {
		return "missing"
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("error: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func result(err error) string {
	if err == nil {
		return "OK"
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return err.Error()
}

func raw(nr uintptr, args ...uintptr) (uintptr, error) {
	var a [6]uintptr
	copy(a[:], args)
	r, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	if e != 0 {
		return r, e
	}
	return r, nil
}

const all = ^uintptr(0) // -1: an invalid fd, address, pid and flag set at once

// probes returns the victim's checks. Every blocked probe is harmless when
// it is NOT filtered (the control run does exactly that, as root): invalid
// arguments, or an effect confined to the victim that is undone at once.
func probes(dir string) map[string]func() string {
	p := map[string]func() string{}
	info, _, _ := nativeArch()

	// Every blocked syscall with all arguments -1, except where -1 would
	// make an unfiltered kernel work hard (init_module: a 2^64-byte buffer).
	for _, name := range blocked {
		nr, ok := info.SyscallNames[name]
		if !ok {
			continue
		}
		args := []uintptr{all, all, all, all, all, all}
		if name == "init_module" {
			args = []uintptr{0, 0, 0} // a zero-length image: ENOEXEC
		}
		p["blocked "+name] = func() string { _, err := raw(uintptr(nr), args...); return result(err) }
	}

	// Blocked, with the arguments an attacker would use.
	p["unshare(CLONE_NEWUSER)"] = func() string { return result(unix.Unshare(unix.CLONE_NEWUSER)) }
	p["unshare(CLONE_NEWNS)"] = func() string { return result(unix.Unshare(unix.CLONE_NEWNS)) }
	p["mount(tmpfs)"] = func() string {
		target := filepath.Join(dir, "mnt")
		if err := os.Mkdir(target, 0o700); err != nil {
			return "mkdir: " + err.Error()
		}
		err := unix.Mount("none", target, "tmpfs", 0, "")
		if err == nil {
			unix.Unmount(target, unix.MNT_DETACH)
		}
		return result(err)
	}
	p["ptrace(PTRACE_SEIZE, parent)"] = func() string {
		// SEIZE, unlike ATTACH, does not stop the tracee if it is not filtered.
		ppid := os.Getppid()
		_, err := raw(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(ppid), 0, 0)
		if err == nil {
			raw(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(ppid), 0, 0)
		}
		return result(err)
	}
	p["ptrace(PTRACE_ATTACH, child)"] = func() string {
		cmd := exec.Command("/bin/sleep", "30")
		if err := cmd.Start(); err != nil {
			return "start: " + err.Error()
		}
		defer cmd.Wait()
		defer cmd.Process.Kill()
		return result(unix.PtraceAttach(cmd.Process.Pid))
	}
	p["process_vm_readv(parent)"] = func() string {
		var buf [8]byte
		local := []unix.Iovec{{Base: &buf[0], Len: 8}}
		remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&buf[0])), Len: 8}}
		_, err := unix.ProcessVMReadv(os.Getppid(), local, remote, 0)
		return result(err)
	}
	p["keyctl(KEYCTL_GET_KEYRING_ID)"] = func() string {
		_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_PROCESS_KEYRING, 0, 0, 0)
		return result(err)
	}
	p["add_key(user)"] = func() string {
		_, err := unix.AddKey("user", "execbox-victim", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
		return result(err)
	}
	p["bpf(BPF_MAP_CREATE)"] = func() string {
		var attr [128]byte // zero attributes: EINVAL when not filtered
		_, err := raw(unix.SYS_BPF, unix.BPF_MAP_CREATE, uintptr(unsafe.Pointer(&attr[0])), uintptr(len(attr)))
		return result(err)
	}
	p["io_uring_setup(8)"] = func() string {
		var params [120]byte
		fd, err := raw(unix.SYS_IO_URING_SETUP, 8, uintptr(unsafe.Pointer(&params[0])))
		if err == nil {
			unix.Close(int(fd))
		}
		return result(err)
	}
	p["userfaultfd(O_CLOEXEC)"] = func() string {
		fd, err := raw(unix.SYS_USERFAULTFD, unix.O_CLOEXEC)
		if err == nil {
			unix.Close(int(fd))
		}
		return result(err)
	}
	p["perf_event_open(cpu-clock)"] = func() string {
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK}
		attr.Size = uint32(unsafe.Sizeof(attr))
		fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err == nil {
			unix.Close(fd)
		}
		return result(err)
	}
	p["clone3(NULL, 0)"] = func() string { _, err := raw(unix.SYS_CLONE3, 0, 0); return result(err) }
	// CLONE_THREAD without CLONE_SIGHAND is EINVAL in the kernel, so an
	// unfiltered probe creates nothing.
	for _, f := range []struct {
		name string
		flag uintptr
	}{
		{"NEWNS", unix.CLONE_NEWNS}, {"NEWUTS", unix.CLONE_NEWUTS}, {"NEWIPC", unix.CLONE_NEWIPC},
		{"NEWUSER", unix.CLONE_NEWUSER}, {"NEWPID", unix.CLONE_NEWPID}, {"NEWNET", unix.CLONE_NEWNET},
		{"NEWCGROUP", unix.CLONE_NEWCGROUP},
	} {
		p["clone(CLONE_"+f.name+"|CLONE_THREAD)"] = func() string {
			_, err := raw(unix.SYS_CLONE, f.flag|unix.CLONE_THREAD)
			return result(err)
		}
	}
	p["personality(ADDR_NO_RANDOMIZE)"] = func() string {
		_, err := raw(unix.SYS_PERSONALITY, addrNoRandomize)
		if err == nil {
			raw(unix.SYS_PERSONALITY, 0)
		}
		return result(err)
	}
	p["socket(AF_VSOCK)"] = func() string { return result(socket(unix.AF_VSOCK)) }
	p["socket(AF_ALG)"] = func() string { return result(socket(unix.AF_ALG)) }

	// Allowed.
	p["getpid"] = func() string {
		if unix.Getpid() != os.Getpid() || os.Getpid() <= 0 {
			return "wrong pid"
		}
		return "OK"
	}
	p["open/write/read"] = func() string {
		name := filepath.Join(dir, "file")
		if err := os.WriteFile(name, []byte("hello"), 0o600); err != nil {
			return result(err)
		}
		b, err := os.ReadFile(name)
		if err == nil && string(b) != "hello" {
			return "read back " + string(b)
		}
		return result(err)
	}
	p["clone(CLONE_THREAD) passes the filter"] = func() string {
		_, err := raw(unix.SYS_CLONE, unix.CLONE_THREAD) // EINVAL from the kernel, not EPERM
		return result(err)
	}
	p["threads"] = func() string {
		// Locked goroutines force the runtime to clone new OS threads.
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for range 64 {
			wg.Go(func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				if unix.Gettid() <= 0 {
					errs <- errors.New("no tid")
				}
			})
		}
		wg.Wait()
		close(errs)
		return result(<-errs)
	}
	p["pipe2+epoll+eventfd"] = func() string {
		var fds [2]int
		if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
			return result(err)
		}
		defer unix.Close(fds[0])
		defer unix.Close(fds[1])
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return result(err)
		}
		defer unix.Close(ep)
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fds[0], &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fds[0])}); err != nil {
			return result(err)
		}
		unix.Write(fds[1], []byte{1})
		ev := make([]unix.EpollEvent, 1)
		if n, err := unix.EpollWait(ep, ev, 1000); err != nil || n != 1 {
			return fmt.Sprintf("epoll_wait: %d %v", n, err)
		}
		efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
		if err == nil {
			unix.Close(efd)
		}
		return result(err)
	}
	p["mmap"] = func() string {
		b, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err != nil {
			return result(err)
		}
		b[1<<19] = 1
		return result(unix.Munmap(b))
	}
	p["personality(query)"] = func() string {
		_, err := raw(unix.SYS_PERSONALITY, 0xffffffff)
		return result(err)
	}
	p["socket(AF_INET)"] = func() string { return result(socket(unix.AF_INET)) }
	p["socket(AF_UNIX)"] = func() string { return result(socket(unix.AF_UNIX)) }
	p["fork+exec /bin/true"] = func() string { return result(exec.Command("/bin/true").Run()) }
	return p
}

func socket(domain int) error {
	fd, err := unix.Socket(domain, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// threadStatus reads the seccomp mode and no_new_privs of every thread.
func threadStatus() []string {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	var out []string
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "status"))
		if err != nil {
			continue // the thread exited
		}
		line := t.Name()
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && (k == "Seccomp" || k == "NoNewPrivs") {
				line += " " + k + "=" + strings.TrimSpace(v)
			}
		}
		out = append(out, line)
	}
	return out
}

// personality(2) flags that weaken ASLR and NX (linux/personality.h).
const (
	addrNoRandomize = 0x0040000
	readImpliesExec = 0x0400000
)
