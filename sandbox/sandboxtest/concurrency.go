package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// swapProgram swaps the work dir's directory d for a symlink to the host
// directory victim and back, and d/f for a symlink to victim/f and back,
// as fast as it can, until a file "stop" appears; it prints "swapping"
// first and, every 500 rounds, "swaps N": how many symlinks it made (a
// swap that cannot happen, say on a directory the host left owned by
// root, is not counted).
const swapProgram = `
import os, shutil, sys, time
V = sys.argv[1]
def swap(path, target):
    # path becomes a symlink to target for a moment, then is itself again;
    # True when the symlink was made.
    # The program is the only one making symlinks, and it removes its own
    # before it returns: "d" is never a symlink while "d/f" is swapped.
    # The symlink stays ~0.1 ms, so a check-then-use window on the host
    # side walks into it often, not once in tens of thousands of tries.
    tmp = path + ".real"
    try: os.rename(path, tmp)
    except OSError: return False
    made = True
    try: os.symlink(target, path)
    except OSError: made = False
    time.sleep(0.0001)
    try:
        if os.path.islink(path): os.unlink(path)
    except OSError: pass
    try: os.rename(tmp, path)
    except OSError:
        # the host made a new one meanwhile: keep it, drop ours
        if os.path.isdir(tmp) and not os.path.islink(tmp): shutil.rmtree(tmp, ignore_errors=True)
        else:
            try: os.unlink(tmp)
            except OSError: pass
    return made
print("swapping", flush=True)
n = made = 0
while not os.path.exists("stop") and n < 10_000_000:
    made += swap("d", V)
    made += swap("d/f", V + "/f")
    time.sleep(0.0002)  # as long real as symlinked, about
    n += 1
    if n % 500 == 0:
        print("swaps", made, flush=True)
print("done", made, flush=True)
`

func (s *suite) testConcurrency(t *testing.T) {
	s.run(t, "exec_busy", func(t *testing.T) {
		// One Exec at a time: while one runs (it waits on its stdin for
		// the host), a second is refused at once with ErrBusy
		// "sandbox_busy" and runs nothing; the first is unaffected and,
		// once it has ended, the next Exec runs.
		sb := s.create(t, s.spec(func(sp *sandbox.Spec) { sp.Limits.Wall = 20 * time.Second }))
		out := newWatch("running\n")
		g := newGate(t)
		p1 := sh(`echo running; read -r x; echo "first $x"`)
		p1.Stdout, p1.Stdin = out, g
		first := goExec(s.ctx(t), sb, p1)
		select {
		case <-out.seen:
		case o := <-first:
			t.Fatalf("the first Exec ended before it ran: err=%v %s", o.err, describe(o.res))
		}
		second := goExec(s.ctx(t), sb, sh("echo ran > second-ran; echo ran"))
		var o2 execOutcome
		select {
		case o2 = <-second:
		case o1 := <-first:
			t.Fatalf("the first Exec ended (%v %s) before the second returned: the second waited for it instead of being refused",
				o1.err, describe(o1.res))
		}
		if !errors.Is(o2.err, sandbox.ErrBusy) || sandbox.CodeOf(o2.err) != sandbox.CodeBusy {
			t.Errorf("a second Exec while one runs: want ErrBusy %q, got err=%v (code %q) %s", sandbox.CodeBusy, o2.err, sandbox.CodeOf(o2.err), describe(o2.res))
		}
		g.open("go\n")
		o1 := <-first
		if o1.err != nil {
			t.Fatalf("the first Exec: %v", o1.err)
		}
		wantExit(t, o1.res, 0)
		if o1.res.Stdout != "running\nfirst go\n" {
			t.Errorf("the first Exec: %s", describe(o1.res))
		}
		res := s.exec(t, sb, sh("if test -e second-ran; then echo ran; else echo absent; fi"))
		wantExit(t, res, 0)
		if res.Stdout != "absent\n" {
			t.Errorf("the refused Exec ran its program: %s", describe(res))
		}
	})

	s.run(t, "symlink_race", s.testSymlinkRace)
}

// testSymlinkRace: while the program swaps a work-dir directory (and a
// file in it) for a symlink to a host directory and back, WriteFiles and
// Artifacts run concurrently, again and again; nothing is ever written
// into the host directory or read from it.
func (s *suite) testSymlinkRace(t *testing.T) {
	victim := t.TempDir()
	secret := "victim-" + token()
	if err := os.WriteFile(filepath.Join(victim, "f"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	sb := s.create(t, s.spec(func(sp *sandbox.Spec) { sp.Limits.Wall = 120 * time.Second }))
	if err := sb.WriteFiles(s.ctx(t), map[string][]byte{"d/f": []byte("inside")}); err != nil {
		t.Fatalf("WriteFiles: %v", err)
	}
	out := newWatch("swapping\n")
	p := &sandbox.Process{Args: []string{"python3", "-I", "-c", swapProgram, victim}, Stdout: out}
	// The program outlives the operations' own bound (opTimeout/2 below).
	pctx, cancel := context.WithTimeout(t.Context(), 2*s.cfg.opTimeout)
	defer cancel()
	prog := goExec(pctx, sb, p)
	stopped := make(chan struct{})
	var po execOutcome
	go func() { po = <-prog; close(stopped) }()
	swaps := func() int {
		n := 0
		for _, l := range strings.Split(out.String(), "\n") {
			if v, ok := strings.CutPrefix(l, "swaps "); ok {
				n, _ = strconv.Atoi(v)
			}
		}
		return n
	}
	if !out.waitFor(func(o string) bool { return strings.Contains(o, "swapping\n") }, stopped, s.cfg.opTimeout) {
		<-stopped
		t.Fatalf("the swapping program did not start: err=%v %s", po.err, describe(po.res))
	}

	// The operations go on until each ran 50 times, the program made
	// 2000 more symlinks while they ran, and each operation caught a symlink
	// in its way 50 times (a refused WriteFiles; Artifacts listing one in
	// Skipped), so they really overlapped: a writer or reader with a window
	// between its check and its use walks into it. A backend too slow for
	// that gets opTimeout/2, then the checks below.
	const minOps, minSwaps, minSeen = 50, 2000, 50
	var (
		mu      sync.Mutex
		counts  = map[string]int{}
		leaks   []string
		opsDone sync.WaitGroup
		quit    = make(chan struct{})
	)
	count := func(what string) {
		mu.Lock()
		counts[what]++
		mu.Unlock()
	}
	leak := func(format string, args ...any) {
		mu.Lock()
		leaks = append(leaks, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	loop := func(op func(i int)) {
		defer opsDone.Done()
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			default:
			}
			op(i)
		}
	}
	opsDone.Add(2)
	go loop(func(i int) {
		data := []byte("written-" + strconv.Itoa(i))
		err := sb.WriteFiles(s.ctx(t), map[string][]byte{"d/f": data, "d/sub/g": data})
		switch {
		case err == nil:
			count("write ok")
		case errors.Is(err, sandbox.ErrInvalid):
			count("write refused")
		default:
			count("write failed")
		}
	})
	go loop(func(int) {
		a, err := sb.Artifacts(s.ctx(t))
		if err != nil {
			count("artifacts failed")
			return
		}
		count("artifacts ok")
		if slices.ContainsFunc(a.Skipped, func(sk sandbox.Skipped) bool { return sk.Reason == "symlink" }) {
			count("artifacts saw a symlink")
		}
		for _, f := range a.Files {
			if bytes.Contains(f.Data, []byte(secret)) {
				leak("Artifacts returned %q with the content of the host file %s", f.Path, filepath.Join(victim, "f"))
			}
		}
	})
	base := swaps()
	deadline := time.Now().Add(s.cfg.opTimeout / 2)
	for {
		mu.Lock()
		enough := counts["write ok"]+counts["write refused"]+counts["write failed"] >= minOps &&
			counts["artifacts ok"]+counts["artifacts failed"] >= minOps &&
			counts["write refused"] >= minSeen && counts["artifacts saw a symlink"] >= minSeen
		mu.Unlock()
		if enough && swaps()-base >= minSwaps {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-stopped:
			deadline = time.Now()
		case <-out.lines:
		case <-time.After(50 * time.Millisecond):
		}
	}
	close(quit)
	opsDone.Wait()
	swapped := swaps() - base
	// Stop the program: "stop" is at the top of the work dir, which the
	// program never swaps.
	if err := sb.WriteFiles(s.ctx(t), map[string][]byte{"stop": []byte("1")}); err != nil {
		t.Errorf("WriteFiles(stop): %v", err)
	}
	select {
	case <-stopped:
	case <-time.After(s.cfg.opTimeout):
		t.Fatalf("the swapping program did not stop")
	}
	t.Logf("%d symlinks made while the operations ran; operations: %v", swapped, counts)

	for _, l := range leaks {
		t.Error(l)
	}
	ents, err := os.ReadDir(victim)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"f"}) {
		t.Errorf("WriteFiles wrote through a symlink into the host directory %s: it holds %q, want only \"f\"", victim, names)
	}
	if b, err := os.ReadFile(filepath.Join(victim, "f")); err != nil || string(b) != secret {
		t.Errorf("WriteFiles wrote through a symlink into the host file %s: %q, %v", filepath.Join(victim, "f"), b, err)
	}
	if po.err != nil || po.res.Reason != sandbox.ReasonExited || po.res.ExitCode != 0 {
		t.Errorf("the swapping program: err=%v %s", po.err, describe(po.res))
	}
	if swapped < minSwaps {
		t.Errorf("the program made only %d symlinks while the operations ran (want %d): the check proves little", swapped, minSwaps)
	}
}
