package sandboxtest

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// A process tree that tries every way out of a kill, and heartbeats that
// show from the host whether any of it still runs.
//
// Every backend shares the work dir with the host, so the tree's members
// beat (append a byte, every 50 ms) to files there, each holding its file
// open: a survivor keeps beating even after the work dir is unlinked or
// unmounted. The host reads the beats where it can see them — the files
// themselves, found below the backend's work roots (WithWorkRoot) and kept
// open from before the kill — or else through Artifacts, the sandbox's own
// API, after the kill (never with an Exec, which under some backends sees
// only itself). The tree is dead when the beats stop: none may come while a
// control process on the host, beating the same way, beats quietBeats
// times. Where the tree's processes are host processes the host's /proc
// must also show none of them.

// beaters are the members of the tree, each escaping a process-group kill
// another way: a plain background job, one that called setsid, a double
// fork through a subshell, a double fork through another sh, and one that
// ignores HUP, INT and TERM.
var beaters = []string{"job", "setsid", "subshell", "shc", "nohup"}

const (
	// quietBeats is how often the host's control must beat with no beat
	// of the tree for the tree to count as dead: a second of beats, so
	// that survivors a loaded host stalls for a moment still beat in it.
	quietBeats = 20
	// settleMax bounds how long after the kill the beats may go on (the
	// kill is asynchronous for some backends); past it they are survivors.
	settleMax = 15 * time.Second
	// hangGuard bounds how long Exec may take to return after its limit,
	// a cancel or Close.
	hangGuard = 15 * time.Second
)

// treeScript is the tree for token tok: it makes hb-<tok> in the work dir
// and starts the beaters; each prints "ready <name>" once it has beaten.
// The main shell waits for them forever. tok is in every beater's argv.
func treeScript(tok string) string {
	return `T=hb-` + tok + `
B='exec 3>>"$0"; echo . >&3; echo "ready ${0##*/}"; while :; do echo . >&3; sleep 0.05; done'
mkdir "$T"
sh -c "$B" "$T/job" &
setsid sh -c "$B" "$T/setsid" &
(sh -c "$B" "$T/subshell" &)
sh -c 'sh -c "$1" "$2" &' x "$B" "$T/shc"
(trap '' HUP INT TERM; exec sh -c "$B" "$T/nohup") &
wait`
}

// treeUp reports whether out holds the ready line of every beater.
func treeUp(out string) bool {
	for _, b := range beaters {
		if !strings.Contains(out, "ready "+b+"\n") {
			return false
		}
	}
	return true
}

// beats are the beat counts of the tree's members.
type beats map[string]int64

func (b beats) String() string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(b)) {
		parts = append(parts, fmt.Sprintf("%s=%d", n, b[n]))
	}
	return strings.Join(parts, " ")
}

// beatSource reads the beats.
type beatSource interface {
	read() (beats, error)
	describe() string
}

// hostBeats reads the beat files on the host through fds opened before
// the kill.
type hostBeats struct {
	dir   string
	files map[string]*os.File
}

func (h *hostBeats) describe() string { return "the beat files on the host (" + h.dir + ")" }

func (h *hostBeats) read() (beats, error) {
	b := beats{}
	for n, f := range h.files {
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		b[n] = st.Size()
	}
	return b, nil
}

// findHostBeats looks for the beat dir of tok below the backend's work
// roots and opens its files; nil when there is no work root or it is not
// found there.
func (s *suite) findHostBeats(t *testing.T, tok string) *hostBeats {
	t.Helper()
	name := "hb-" + tok
	for _, root := range s.cfg.workRoots {
		var found string
		seen := 0
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || found != "" {
				return filepath.SkipDir
			}
			if seen++; seen > 20000 {
				return filepath.SkipAll
			}
			if d.IsDir() && d.Name() == name {
				found = p
				return filepath.SkipAll
			}
			if d.IsDir() && strings.Count(strings.TrimPrefix(p, root), "/") > 8 {
				return filepath.SkipDir
			}
			return nil
		})
		if found == "" {
			continue
		}
		h := &hostBeats{dir: found, files: map[string]*os.File{}}
		for _, b := range beaters {
			f, err := os.Open(filepath.Join(found, b))
			if err != nil {
				t.Errorf("opening the beat file %s on the host: %v", b, err)
				continue
			}
			t.Cleanup(func() { f.Close() })
			h.files[b] = f
		}
		return h
	}
	return nil
}

// apiBeats reads the beats through Artifacts.
type apiBeats struct {
	s   *suite
	t   *testing.T
	sb  sandbox.Sandbox
	tok string
}

func (a *apiBeats) describe() string { return "the beat files read through Artifacts" }

func (a *apiBeats) read() (beats, error) {
	arts := a.s.artifacts(a.t, a.sb)
	b := beats{}
	for _, f := range arts.Files {
		if dir, name, ok := strings.Cut(f.Path, "/"); ok && dir == "hb-"+a.tok {
			b[name] = int64(len(f.Data))
		}
	}
	return b, nil
}

// control is a host process beating like a member of the tree: while it
// beats quietBeats times, a surviving member would beat too.
type control struct {
	cmd  *exec.Cmd
	file string
}

func startControl(t *testing.T) *control {
	t.Helper()
	file := filepath.Join(t.TempDir(), "control")
	// One byte a beat: its file's size is its count of beats.
	cmd := exec.Command("/bin/sh", "-c", `exec 3>>"$0"; while :; do printf . >&3; sleep 0.05; done`, file)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the host's control beater: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // ours
		_ = cmd.Wait()
	})
	return &control{cmd: cmd, file: file}
}

func (c *control) beats() int64 {
	st, err := os.Stat(c.file)
	if err != nil {
		return 0
	}
	return st.Size()
}

// waitBeat blocks until the control has beaten past n (or 5 s passed: the
// host is stalled; the caller's own deadline decides then).
func (c *control) waitBeat(n int64) {
	for deadline := time.Now().Add(5 * time.Second); c.beats() <= n && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// checkBeatsStop fails the test unless the beats of src stop once the tree
// was killed: up to settleMax for the kill to take effect, then none while
// the control beats quietBeats times. The beats must show the whole tree
// was up (every member beat at least once), or the check proves nothing.
func (s *suite) checkBeatsStop(t *testing.T, src beatSource, what string) {
	t.Helper()
	ctl := startControl(t)
	first, err := src.read()
	if err != nil {
		t.Fatalf("reading the heartbeats (%s): %v", src.describe(), err)
	}
	for _, b := range beaters {
		if first[b] == 0 {
			t.Fatalf("%s: member %q of the tree never beat (%s: %s); the check below would prove nothing", what, b, src.describe(), first)
		}
	}
	last, quietSince := first, ctl.beats()
	lastChange := time.Now()
	deadline := time.Now().Add(settleMax)
	for {
		ctl.waitBeat(ctl.beats())
		cur, err := src.read()
		if err != nil {
			t.Fatalf("reading the heartbeats (%s): %v", src.describe(), err)
		}
		if !maps.Equal(cur, last) {
			last, quietSince, lastChange = cur, ctl.beats(), time.Now()
		}
		if ctl.beats()-quietSince >= quietBeats {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: heartbeats continued %v after the kill: the tree survived (%s: %s right after the kill, %s now, last change %v ago)",
				what, settleMax, src.describe(), first, cur, time.Since(lastChange).Round(time.Millisecond))
		}
	}
	if !maps.Equal(first, last) {
		t.Logf("%s: members beat after the kill returned, then stopped (%s → %s)", what, first, last)
	}
}

// checkProcsGone fails the test when a host process still carries tok
// (only where the backend's processes are host processes), killing it.
func (s *suite) checkProcsGone(t *testing.T, tok string, what string) {
	t.Helper()
	if !s.hostVisible() {
		return
	}
	left, err := procsWith(tok)
	if err != nil {
		t.Logf("cannot read the host's /proc (%v); the host-side process check is skipped", err)
		return
	}
	for _, p := range left {
		t.Errorf("%s: a process of the tree survived: %s", what, p)
		_ = syscall.Kill(p.pid, syscall.SIGKILL) // ours: tok is unique to this test
	}
}

// hostVisible: the processes of this backend are host processes, so the
// host's /proc sees them. Under a user-space kernel or a VM they are not.
func (s *suite) hostVisible() bool { return s.caps.Isolation < sandbox.IsolationKernel }

// errNoBeats says why the suite cannot watch a closed sandbox's tree.
var errNoBeats = errors.New("the tree's heartbeats are not visible on the host: the backend declares no work root (WithWorkRoot) the suite finds them under, and its processes are not host processes")
