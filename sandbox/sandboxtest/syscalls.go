package sandboxtest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/execbox/execbox/sandbox"
)

// syscallNumbers are the numbers of the calls the table makes raw, per
// architecture (GOARCH); everything else goes through Python or libc.
var syscallNumbers = map[string]map[string]int{
	"amd64": {
		"futex": 202, "clone": 56, "clone3": 435, "pivot_root": 155, "kexec_load": 246, "init_module": 175,
		"delete_module": 176, "keyctl": 250, "add_key": 248, "bpf": 321, "perf_event_open": 298,
		"userfaultfd": 323, "io_uring_setup": 425, "reboot": 169, "nanosleep": 35,
	},
	"arm64": {
		"futex": 98, "clone": 220, "clone3": 435, "pivot_root": 41, "kexec_load": 104, "init_module": 105,
		"delete_module": 106, "keyctl": 219, "add_key": 217, "bpf": 280, "perf_event_open": 241,
		"userfaultfd": 282, "io_uring_setup": 425, "reboot": 142, "nanosleep": 101,
	},
}

// syscallPrelude is what every row may use: the modules, libc, NR (the raw
// syscall numbers), en (an errno's name) and refused.
const syscallPrelude = `import ctypes, errno, fcntl, mmap, os, resource, select, signal, socket, stat, struct, sys, termios, threading, time
libc = ctypes.CDLL(None, use_errno=True)
NR = %s
def en(e): return errno.errorcode.get(e, str(e))
def refused(r, e):
    if r >= 0: return "allowed (returned %%d)" %% r
    return ("denied " if e in (errno.EPERM, errno.EACCES, errno.ENOSYS) else "allowed, failed with ") + en(e)
def in_child(f):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try: out = str(f())
        except BaseException as e: out = "error %%s: %%s" %% (type(e).__name__, e)
        os.write(w, out.encode()[:4000]); os._exit(0)
    os.close(w)
    data = b""
    while True:
        c = os.read(r, 4096)
        if not c: break
        data += c
    os.close(r); os.waitpid(pid, 0)
    return data.decode()
`

// SyscallProbesMarker is the line of the suite's Python programs (the
// syscall table's, fs/python_stat_scandir's, io/select_poll_pipe's) after
// which their checks run; everything before it is imports and helpers. The
// suite's self-test inserts a stricter seccomp filter there.
const SyscallProbesMarker = "# execbox-suite: probes start"

// syscallProgram is the Python program that runs rows and prints one line
// per row: its name and result.
func syscallProgram(rows []SyscallRow) string {
	nr := syscallNumbers[runtime.GOARCH]
	var pairs []string
	for name, n := range nr {
		pairs = append(pairs, fmt.Sprintf("%q: %d", name, n))
	}
	var b strings.Builder
	fmt.Fprintf(&b, syscallPrelude, "{"+strings.Join(pairs, ", ")+"}")
	var names []string
	for i, r := range rows {
		fn := fmt.Sprintf("probe_%d", i)
		child := "False"
		if !r.Allowed {
			child = "True"
		}
		names = append(names, fmt.Sprintf("(%q, %s, %s)", r.Name, fn, child))
		b.WriteString("def " + fn + "():\n")
		for _, l := range strings.Split(strings.Trim(r.Probe, "\n"), "\n") {
			b.WriteString("    " + l + "\n")
		}
	}
	b.WriteString(SyscallProbesMarker + "\n")
	b.WriteString("for name, f, child in [" + strings.Join(names, ", ") + "]:\n")
	b.WriteString(`    try: out = in_child(f) if child else f()
    except BaseException as e: out = "error %s: %s" % (type(e).__name__, e)
    print(name, out.replace("\n", " "), flush=True)
print("end", flush=True)
`)
	return b.String()
}

func (s *suite) testSyscalls(t *testing.T) {
	if syscallNumbers[runtime.GOARCH] == nil {
		t.Skipf("the syscall table has no numbers for %s", runtime.GOARCH)
	}
	// table runs the rows in one program and checks each row in a subtest
	// of its own.
	table := func(t *testing.T, allowed bool) {
		var rows []SyscallRow
		for _, r := range syscallTable {
			if r.Allowed == allowed {
				rows = append(rows, r)
			}
		}
		sb := s.create(t, s.spec(nil))
		res := s.exec(t, sb, &sandbox.Process{Args: []string{"python3", "-I", "-c", syscallProgram(rows)}})
		got := map[string]string{}
		for _, l := range strings.Split(res.Stdout, "\n") {
			if name, out, ok := strings.Cut(l, " "); ok {
				got[name] = out
			}
		}
		for _, r := range rows {
			s.run(t, r.Name, func(t *testing.T) {
				out, ok := got[r.Name]
				switch {
				case !ok:
					t.Fatalf("%s (%s): no result; the program ended: %s", r.Name, r.Syscall, describe(res))
				case r.Want == "denied" && strings.HasPrefix(out, "denied "):
				case out != r.Want:
					t.Fatalf("%s (%s): got %q, want %q", r.Name, r.Syscall, out, r.Want)
				}
			})
		}
	}
	s.run(t, "allowed", func(t *testing.T) { table(t, true) })
	s.run(t, "denied", func(t *testing.T) {
		if s.caps.Isolation == sandbox.IsolationNone {
			t.Skipf("backend %s has no isolation: no syscall is denied to its programs", s.b.Name())
		}
		table(t, false)
	})
}
