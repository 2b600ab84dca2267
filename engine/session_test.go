package engine

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// keeper is a session-capable backend whose sandboxes count how many are
// open and whose Exec blocks until its context ends when told to. The
// session rules (bounds, owners, expiry, idleness) are policy over the
// sandbox contract; the real backends' sessions are tested in
// backend/all and by the conformance suite.
type keeper struct {
	open atomic.Int64
	made atomic.Int64
}

func (k *keeper) Name() string { return "t-keeper" }
func (k *keeper) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: sandbox.IsolationProcess, Sessions: true}
}
func (k *keeper) Health(context.Context) sandbox.Health {
	return sandbox.Health{Available: true, Ready: true, Reason: "ok"}
}
func (k *keeper) Create(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	k.open.Add(1)
	return &kept{k: k, id: sandbox.NewID(), done: make(chan struct{})}, nil
}

type kept struct {
	k      *keeper
	id     string
	closed atomic.Bool
	done   chan struct{} // closed by Close, which ends a running Exec
}

func (b *kept) ID() string                                          { return b.id }
func (b *kept) WriteFiles(context.Context, map[string][]byte) error { return nil }
func (b *kept) Artifacts(context.Context) (sandbox.Artifacts, error) {
	return sandbox.Artifacts{}, nil
}
func (b *kept) Close(context.Context) error {
	if b.closed.CompareAndSwap(false, true) {
		close(b.done)
		b.k.open.Add(-1)
	}
	return nil
}
func (b *kept) Exec(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	if b.closed.Load() {
		return nil, sandbox.Errorf(sandbox.ErrNotFound, "sandbox_closed", "sandbox %s is closed", b.id)
	}
	if p.Args[0] == "block" {
		select {
		case <-ctx.Done():
		case <-b.done:
		}
		return &sandbox.Result{Reason: sandbox.ReasonCanceled}, nil
	}
	return &sandbox.Result{Reason: sandbox.ReasonExited}, nil
}

var keepers = &keeper{}

func init() {
	sandbox.Register(sandbox.Registration{Name: "t-keeper", New: func(sandbox.Settings) (sandbox.Backend, error) { return keepers, nil }})
}

func sessionEngine(t *testing.T, o SessionOptions) (*Engine, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var events []string
	e, err := New(Options{Backends: []string{"t-keeper", "t-capture"}, Backend: "t-keeper", Sessions: o})
	if err != nil {
		t.Fatal(err)
	}
	e.ObserveSessions(func(ev string, s SessionInfo) {
		mu.Lock()
		events = append(events, ev+":"+s.Owner)
		mu.Unlock()
	})
	t.Cleanup(func() {
		e.Close()
		if n := keepers.open.Load(); n != 0 {
			t.Errorf("%d sandboxes left open after the engine closed", n)
		}
	})
	return e, &events
}

var (
	alice = Owner{Name: "alice"}
	bob   = Owner{Name: "bob"}
	root  = Owner{Name: "root", Privileged: true}
)

func open(t *testing.T, e *Engine, o Owner, req SessionRequest) *Session {
	t.Helper()
	s, err := e.OpenSession(context.Background(), o, req)
	if err != nil {
		t.Fatalf("OpenSession(%s): %v", o.Name, err)
	}
	return s
}

func wantCode(t *testing.T, err error, kind *sandbox.Kind, code string) {
	t.Helper()
	if !errors.Is(err, kind) || sandbox.CodeOf(err) != code {
		t.Fatalf("err = %v (code %q), want %v %q", err, sandbox.CodeOf(err), kind, code)
	}
}

// TestSessionOwners: a session is its owner's; another owner gets 404 as
// if it did not exist, a privileged owner sees all; close is idempotent.
func TestSessionOwners(t *testing.T) {
	e, events := sessionEngine(t, SessionOptions{})
	a := open(t, e, alice, SessionRequest{Labels: map[string]string{"agent": "one"}})
	b := open(t, e, bob, SessionRequest{})
	if _, err := e.Session(bob, a.ID()); err == nil {
		t.Fatal("bob sees alice's session")
	} else {
		wantCode(t, err, sandbox.ErrNotFound, "session_not_found")
	}
	wantCode(t, e.CloseSession(context.Background(), bob, a.ID()), sandbox.ErrNotFound, "session_not_found")
	if got, err := e.Session(root, a.ID()); err != nil || got != a {
		t.Fatalf("admin: %v, %v", got, err)
	}
	if l := e.Sessions(alice); len(l) != 1 || l[0].ID != a.ID() || l[0].Labels["agent"] != "one" {
		t.Fatalf("alice lists %+v", l)
	}
	if l := e.Sessions(root); len(l) != 2 {
		t.Fatalf("admin lists %d sessions, want 2", len(l))
	}
	for range 2 {
		if err := e.CloseSession(context.Background(), alice, a.ID()); err != nil {
			t.Fatalf("close: %v", err)
		}
	}
	_, err := e.Session(alice, a.ID())
	wantCode(t, err, sandbox.ErrNotFound, "session_closed")
	_, err = e.Session(bob, a.ID())
	wantCode(t, err, sandbox.ErrNotFound, "session_not_found")
	_, err = a.Exec(context.Background(), &sandbox.Process{Args: []string{"x"}})
	wantCode(t, err, sandbox.ErrNotFound, "sandbox_closed")
	_ = b
	if got := *events; len(got) != 3 || got[0] != "created:alice" || got[2] != "closed:alice" {
		t.Fatalf("events %v", got)
	}
}

// TestSessionBounds: Max and PerOwner on both sides; a privileged owner
// is held to Max only; a closed session gives its place back.
func TestSessionBounds(t *testing.T) {
	e, _ := sessionEngine(t, SessionOptions{Max: 3, PerOwner: 2, MaxTTL: time.Hour})
	a1 := open(t, e, alice, SessionRequest{})
	open(t, e, alice, SessionRequest{})
	_, err := e.OpenSession(context.Background(), alice, SessionRequest{})
	wantCode(t, err, sandbox.ErrBusy, "sessions_exhausted")
	open(t, e, root, SessionRequest{})
	_, err = e.OpenSession(context.Background(), root, SessionRequest{})
	wantCode(t, err, sandbox.ErrBusy, "sessions_exhausted")
	if err := e.CloseSession(context.Background(), alice, a1.ID()); err != nil {
		t.Fatal(err)
	}
	open(t, e, bob, SessionRequest{})
}

// TestSessionRequestChecks: TTLs, idle timeouts and labels on both sides
// of their bounds; a backend without sessions is refused.
func TestSessionRequestChecks(t *testing.T) {
	e2, _ := sessionEngine(t, SessionOptions{MaxTTL: time.Hour, MaxIdle: time.Minute})
	open(t, e2, alice, SessionRequest{TTL: time.Hour, Idle: time.Minute})
	for _, req := range []SessionRequest{
		{TTL: time.Hour + 1},
		{Idle: time.Minute + 1},
		{TTL: -1},
		{Labels: map[string]string{"": "x"}},
		{Labels: map[string]string{"k": string(make([]byte, maxLabelLen+1))}},
	} {
		_, err := e2.OpenSession(context.Background(), alice, req)
		wantCode(t, err, sandbox.ErrInvalid, "session_invalid")
	}
	_, err := e2.OpenSession(context.Background(), alice, SessionRequest{Selection: sandbox.Selection{Backend: "t-capture"}})
	wantCode(t, err, sandbox.ErrUnavailable, "sessions_unsupported")
	if _, err := New(Options{Backends: []string{"t-keeper"}, Sessions: SessionOptions{TTL: 2 * time.Hour, MaxTTL: time.Hour}}); err == nil {
		t.Fatal("a default TTL over the maximum was accepted")
	}
}

// TestSessionReaper: a session past its TTL is closed even while it runs
// an Exec (the Exec ends); an idle one is closed, a busy one is not.
func TestSessionReaper(t *testing.T) {
	e, events := sessionEngine(t, SessionOptions{})
	ttl := open(t, e, alice, SessionRequest{TTL: time.Hour})
	idle := open(t, e, bob, SessionRequest{Idle: time.Minute})
	busy := open(t, e, root, SessionRequest{Idle: time.Minute})

	done := make(chan error, 1)
	go func() {
		_, err := ttl.Exec(context.Background(), &sandbox.Process{Args: []string{"block"}})
		done <- err
	}()
	go busy.Exec(context.Background(), &sandbox.Process{Args: []string{"block"}})
	for active(ttl) == 0 || active(busy) == 0 {
		time.Sleep(time.Millisecond)
	}

	e.reap(time.Now().Add(59 * time.Second))
	if n := len(e.Sessions(root)); n != 3 {
		t.Fatalf("%d sessions open before any is due, want 3", n)
	}
	e.reap(time.Now().Add(61 * time.Second))
	if _, err := e.Session(bob, idle.ID()); sandbox.CodeOf(err) != "session_closed" {
		t.Fatalf("idle session: %v", err)
	}
	if _, err := e.Session(root, busy.ID()); err != nil {
		t.Fatalf("a session running an Exec was reaped as idle: %v", err)
	}
	e.reap(time.Now().Add(time.Hour))
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the Exec of an expired session did not end")
	}
	_, err := e.Session(alice, ttl.ID())
	wantCode(t, err, sandbox.ErrNotFound, "session_closed")
	if n := len(e.Sessions(root)); n != 0 {
		t.Fatalf("%d sessions open after the TTL passed", n)
	}
	want := map[string]bool{"idle:bob": true, "expired:alice": true, "expired:root": true}
	for _, ev := range (*events)[3:] {
		if !want[ev] {
			t.Errorf("unexpected event %s", ev)
		}
		delete(want, ev)
	}
	if len(want) > 0 {
		t.Errorf("missing events %v (got %v)", want, *events)
	}
}

// TestSessionsClosedWithTheEngine: Close closes every open session, and
// the reaper runs on its own.
func TestSessionsClosedWithTheEngine(t *testing.T) {
	e, err := New(Options{Backends: []string{"t-keeper"}, Backend: "t-keeper", Sessions: SessionOptions{ReapInterval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	before := keepers.open.Load()
	short := open(t, e, alice, SessionRequest{Idle: 20 * time.Millisecond})
	for i := 0; ; i++ {
		if _, err := e.Session(alice, short.ID()); err != nil {
			break
		}
		if i > 1000 {
			t.Fatal("the reaper did not close an idle session")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for range 5 {
		open(t, e, bob, SessionRequest{})
	}
	e.Close()
	if n := keepers.open.Load(); n != before {
		t.Fatalf("%d sandboxes open after Close, want %d", n, before)
	}
	_, err = e.OpenSession(context.Background(), alice, SessionRequest{})
	if err == nil {
		t.Fatal("a session opened after Close")
	}
}

func active(s *Session) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// Files makes kept a sandbox.Files whose PutFile waits for its context,
// as a stalled upload would.
func (b *kept) PutFile(ctx context.Context, _ string, _ io.Reader, _ int64) (int64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}
func (b *kept) GetFile(context.Context, string, io.Writer, int64) (int64, error) { return 0, nil }
func (b *kept) Stat(context.Context, string) (sandbox.FileInfo, error) {
	return sandbox.FileInfo{}, nil
}
func (b *kept) List(context.Context, string, int) ([]sandbox.FileInfo, bool, error) {
	return nil, false, nil
}
func (b *kept) Remove(context.Context, string) error { return nil }
func (b *kept) Mkdir(context.Context, string) error  { return nil }

// TestSessionCloseEndsFileOperations: a file operation that would not end
// by itself (a stalled upload) ends when its session closes, and a busy
// session is not reaped as idle.
func TestSessionCloseEndsFileOperations(t *testing.T) {
	e, _ := sessionEngine(t, SessionOptions{})
	s := open(t, e, alice, SessionRequest{Idle: time.Minute})
	f, err := s.Files()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.PutFile(context.Background(), "x", strings.NewReader(""), 1)
		done <- err
	}()
	for active(s) == 0 {
		time.Sleep(time.Millisecond)
	}
	e.reap(time.Now().Add(2 * time.Minute))
	if _, err := e.Session(alice, s.ID()); err != nil {
		t.Fatalf("a session with a file operation running was reaped: %v", err)
	}
	if err := e.CloseSession(context.Background(), alice, s.ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the stalled PutFile ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing the session did not end its file operation")
	}
}
