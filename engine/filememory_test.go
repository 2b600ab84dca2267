package engine

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// remoteKeeper keeps its sessions elsewhere (Capabilities.Remote), and
// failingKeeper makes none: both count in keepers, like keeper.
type remoteKeeper struct{ *keeper }

func (remoteKeeper) Name() string { return "t-remote" }
func (remoteKeeper) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: sandbox.IsolationProcess, Sessions: true, Remote: true}
}

type failingKeeper struct{ *keeper }

func (failingKeeper) Name() string { return "t-fails" }
func (failingKeeper) Create(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, sandbox.Errorf(sandbox.ErrInternal, "create_failed", "no sandbox today")
}

func init() {
	sandbox.Register(sandbox.Registration{Name: "t-remote", New: func(sandbox.Settings) (sandbox.Backend, error) { return remoteKeeper{keepers}, nil }})
	sandbox.Register(sandbox.Registration{Name: "t-fails", New: func(sandbox.Settings) (sandbox.Backend, error) { return failingKeeper{keepers}, nil }})
}

const mib = sandbox.MiB

// fileEngine is a keeper engine whose sessions' files may hold total
// bytes, with maxima work_size 256m and tmp_size 64m: a session at the
// maxima holds 320m, and an unprivileged owner's share is
// max(total/2, 320m).
func fileEngine(t *testing.T, total int64) *Engine {
	t.Helper()
	e, err := New(Options{Backends: []string{"t-keeper", "t-remote", "t-fails"}, Backend: "t-keeper",
		Max:      sandbox.Limits{WorkSize: 256 * mib, TmpSize: 64 * mib},
		Sessions: SessionOptions{FileMemory: total, Max: 64, PerOwner: 64}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		if n := e.Admission().SessionMemoryInUse; n != 0 {
			t.Errorf("%d bytes of session file memory held after the engine closed", n)
		}
		if n := keepers.open.Load(); n != 0 {
			t.Errorf("%d sandboxes left open after the engine closed", n)
		}
	})
	return e
}

// sized is a session request of work_size work and tmp_size tmp.
func sized(work, tmp int64) SessionRequest {
	return SessionRequest{Spec: sandbox.Spec{Limits: sandbox.Limits{WorkSize: work, TmpSize: tmp}}}
}

func inUse(e *Engine) int64 { return e.Admission().SessionMemoryInUse }

// wantRefused checks that err is the busy refusal of a session whose
// files do not fit, naming the bound.
func wantRefused(t *testing.T, err error, says string) {
	t.Helper()
	wantCode(t, err, sandbox.ErrBusy, "sessions_exhausted")
	if !strings.Contains(err.Error(), says) {
		t.Fatalf("the refusal does not say %q: %v", says, err)
	}
}

// TestSessionFileMemory (issue 33): every open session holds its
// work_size + tmp_size of FileMemory until it is closed. At the bound a
// session is accepted, one byte past it refused busy, naming
// sessions.max_file_memory; closing one gives its bytes back.
func TestSessionFileMemory(t *testing.T) {
	e := fileEngine(t, 1024*mib)
	if st := e.Admission(); st.SessionMemory != 1024*mib || st.SessionMemoryInUse != 0 {
		t.Fatalf("admission %+v", st)
	}
	var first *Session
	for i := range 3 { // 960m of 1g
		s := open(t, e, root, sized(256*mib, 64*mib))
		if i == 0 {
			first = s
		}
	}
	_, err := e.OpenSession(context.Background(), root, sized(48*mib+1, 16*mib))
	wantRefused(t, err, "(sessions.max_file_memory)")
	if got := inUse(e); got != 960*mib {
		t.Fatalf("a refused session left %d bytes held, want 960m", got)
	}
	open(t, e, root, sized(48*mib, 16*mib)) // exactly the rest
	if got := inUse(e); got != 1024*mib {
		t.Fatalf("%d bytes held, want all 1g", got)
	}
	_, err = e.OpenSession(context.Background(), root, sized(1, 1))
	wantRefused(t, err, "(sessions.max_file_memory)")

	// Closing gives the bytes back, once, whoever closes.
	if err := e.CloseSession(context.Background(), root, first.ID()); err != nil {
		t.Fatal(err)
	}
	if err := e.CloseSession(context.Background(), root, first.ID()); err != nil {
		t.Fatal(err)
	}
	if got := inUse(e); got != 704*mib {
		t.Fatalf("after a close %d bytes held, want 704m", got)
	}
	open(t, e, root, sized(256*mib, 64*mib))
	e.reap(time.Now().Add(48 * time.Hour)) // expired sessions give theirs back too
	if got := inUse(e); got != 0 {
		t.Fatalf("after every session expired %d bytes held", got)
	}
}

// TestSessionFileMemoryShare: an unprivileged owner's sessions hold at
// most half of FileMemory (at the bound accepted, one byte past refused
// naming the share), another owner is not locked out, a privileged owner
// has no share; the share is never below one session at the maxima.
func TestSessionFileMemoryShare(t *testing.T) {
	t.Run("half", func(t *testing.T) {
		e := fileEngine(t, 1024*mib) // alice's share: 512m
		open(t, e, alice, sized(256*mib, 64*mib))
		_, err := e.OpenSession(context.Background(), alice, sized(176*mib+1, 16*mib))
		wantRefused(t, err, "half of sessions.max_file_memory")
		open(t, e, alice, sized(176*mib, 16*mib))
		open(t, e, bob, sized(256*mib, 64*mib))
		open(t, e, root, sized(128*mib, 64*mib)) // the last 192m: no share for root
		if got := inUse(e); got != 1024*mib {
			t.Fatalf("%d bytes held, want all 1g", got)
		}
	})
	t.Run("at least a session at the maxima", func(t *testing.T) {
		e := fileEngine(t, 400*mib) // half is 200m, less than 320m
		open(t, e, alice, sized(256*mib, 64*mib))
		_, err := e.OpenSession(context.Background(), bob, sized(64*mib+1, 16*mib))
		wantRefused(t, err, "(sessions.max_file_memory)")
	})
}

// TestSessionFileMemoryEdges: a session larger than all of FileMemory is
// limit_too_high; a failed create gives its bytes back; sessions on a
// Remote backend hold none; a burst of creates never overshoots.
func TestSessionFileMemoryEdges(t *testing.T) {
	e := fileEngine(t, 300*mib)
	_, err := e.OpenSession(context.Background(), root, sized(256*mib, 44*mib+1))
	wantCode(t, err, sandbox.ErrInvalid, "limit_too_high")
	if !strings.Contains(err.Error(), "sessions.max_file_memory") {
		t.Fatalf("the refusal does not name the key: %v", err)
	}
	full := sized(256*mib, 44*mib)
	full.Selection.Backend = "t-fails"
	_, err = e.OpenSession(context.Background(), root, full)
	wantCode(t, err, sandbox.ErrInternal, "create_failed")
	if got := inUse(e); got != 0 {
		t.Fatalf("a failed create left %d bytes held", got)
	}
	full.Selection.Backend = "t-remote"
	for range 3 {
		open(t, e, root, full)
	}
	if got := inUse(e); got != 0 {
		t.Fatalf("sessions on a remote backend hold %d bytes", got)
	}

	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, err := e.OpenSession(context.Background(), root, sized(100*mib, 0)); err == nil {
				ok.Add(1)
			} else if sandbox.CodeOf(err) != "sessions_exhausted" {
				t.Errorf("a burst's refusal: %v", err)
			}
		})
	}
	wg.Wait()
	// 100m of work and the default 16m of /tmp each: two fit in 300m.
	if ok.Load() != 2 || inUse(e) != 232*mib {
		t.Fatalf("a burst of 16 opened %d sessions holding %d bytes, want 2 holding 232m", ok.Load(), inUse(e))
	}
}
