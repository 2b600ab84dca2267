package sandboxtest

import (
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// fsFiles are the files the fs checks look at: d/a.txt (5 bytes) and
// d/sub/b.bin (3 bytes).
var fsFiles = map[string][]byte{"d/a.txt": []byte("hello"), "d/sub/b.bin": []byte("abc")}

func (s *suite) testFS(t *testing.T) {
	// fsRun writes fsFiles, makes the symlink d/link → a.txt and runs p.
	fsRun := func(t *testing.T, p *sandbox.Process) *sandbox.Result {
		sb := s.create(t, s.spec(nil))
		if err := sb.WriteFiles(s.ctx(t), fsFiles); err != nil {
			t.Fatalf("WriteFiles: %v", err)
		}
		wantExit(t, s.exec(t, sb, sh("ln -s a.txt d/link")), 0)
		return s.exec(t, sb, p)
	}

	s.run(t, "ls_la", func(t *testing.T) {
		res := fsRun(t, sh(`ls -la "$PWD/d"`))
		wantExit(t, res, 0)
		lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		if len(lines) == 0 || !strings.HasPrefix(lines[0], "total ") {
			t.Fatalf("ls -la printed no total line: %s", clip(res.Stdout))
		}
		// name → the type letter of the mode and the size column.
		want := map[string][2]string{".": {"d", ""}, "..": {"d", ""}, "a.txt": {"-", "5"}, "sub": {"d", ""}, "link": {"l", "5"}}
		seen := map[string]bool{}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if len(f) < 9 {
				t.Errorf("ls -la line with %d fields: %q", len(f), l)
				continue
			}
			name := f[8]
			w, ok := want[name]
			if !ok {
				t.Errorf("ls -la lists %q, which is not there", name)
				continue
			}
			seen[name] = true
			if f[0][:1] != w[0] || (w[1] != "" && f[4] != w[1]) {
				t.Errorf("ls -la: %q has mode %s and size %s, want type %q and size %q", name, f[0], f[4], w[0], w[1])
			}
			if name == "link" && (len(f) < 11 || f[9] != "->" || f[10] != "a.txt") {
				t.Errorf("ls -la: the symlink reads %q, want link -> a.txt", l)
			}
		}
		if len(seen) != len(want) {
			t.Errorf("ls -la listed %v, want %d entries: %s", seen, len(want), clip(res.Stdout))
		}
	})

	s.run(t, "stat", func(t *testing.T) {
		res := fsRun(t, sh(`stat -c '%s|%F|%n' d/a.txt d/sub/b.bin && stat -c '%F|%n' d/sub d/link && stat -L -c '%s|%F' d/link`))
		wantExit(t, res, 0)
		want := "5|regular file|d/a.txt\n3|regular file|d/sub/b.bin\ndirectory|d/sub\nsymbolic link|d/link\n5|regular file\n"
		if res.Stdout != want {
			t.Fatalf("stat printed %s, want %s", clip(res.Stdout), clip(want))
		}
	})

	s.run(t, "python_stat_scandir", func(t *testing.T) {
		res := fsRun(t, &sandbox.Process{Args: []string{"python3", "-I", "-c", `import os, stat
` + SyscallProbesMarker + `
st = os.stat("d/a.txt")
print("stat", st.st_size, stat.S_ISREG(st.st_mode))
print("lstat", stat.S_ISLNK(os.lstat("d/link").st_mode), os.stat("d/link").st_size)
for e in sorted(os.scandir("d"), key=lambda e: e.name):
    kind = "symlink" if e.is_symlink() else "dir" if e.is_dir() else "file" if e.is_file() else "other"
    print("entry", e.name, kind, e.stat(follow_symlinks=False).st_size if kind == "file" else "-")
print("walk", sorted(os.path.relpath(os.path.join(r, f), "d") for r, _, fs in os.walk("d") for f in fs))`}})
		wantExit(t, res, 0)
		want := "stat 5 True\nlstat True 5\nentry a.txt file 5\nentry link symlink -\nentry sub dir -\nwalk ['a.txt', 'link', 'sub/b.bin']\n"
		if res.Stdout != want {
			t.Fatalf("python printed %s, want %s", clip(res.Stdout), clip(want))
		}
	})
}

// pollProgram waits on a pipe with select, poll and epoll: not ready at
// first (timeout 0), then, blocked with no timeout, ready once a child has
// written (the child waits on the program's stdin, which the host opens
// only after the program said it is about to block).
const pollProgram = `import os, select, sys
` + SyscallProbesMarker + `
r, w = os.pipe()
p = select.poll(); p.register(r, select.POLLIN)
e = select.epoll(); e.register(r, select.EPOLLIN)
print("idle", len(select.select([r], [], [], 0)[0]), len(p.poll(0)), len(e.poll(0)), flush=True)
pid = os.fork()
if pid == 0:
    sys.stdin.readline()
    os.write(w, b"x")
    os._exit(0)
print("waiting", flush=True)
print("ready", len(select.select([r], [], [])[0]), len(p.poll()), len(e.poll()), os.read(r, 1).decode(), flush=True)
os.waitpid(pid, 0)
`

func (s *suite) testIO(t *testing.T) {
	s.run(t, "select_poll_pipe", func(t *testing.T) {
		out := newWatch("waiting\n")
		g := newGate(t)
		go func() {
			<-out.seen
			g.open("go\n")
		}()
		p := &sandbox.Process{Args: []string{"python3", "-I", "-c", pollProgram}, Stdout: out, Stdin: g}
		res := s.oneShot(t, s.spec(func(sp *sandbox.Spec) { sp.Limits.Wall = 30 * time.Second }), p)
		wantExit(t, res, 0)
		if res.Stdout != "idle 0 0 0\nwaiting\nready 1 1 1 x\n" {
			t.Fatalf("select, poll and epoll on a pipe: %s", describe(res))
		}
	})
}
