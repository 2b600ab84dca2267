package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/sandbox"
)

// poolBackend is a backend whose sandboxes answer a function call as a
// runner would, with their own id as the data, once their stdin ends.
type poolBackend struct {
	mu          sync.Mutex
	made, live  int
	mem         int64         // what each sandbox says it holds
	createDelay time.Duration // every Create takes this long
	failPooled  bool          // a Create with a pool's wall limit fails
	dieAfter    time.Duration // an Exec not handed a call ends by itself
	hang        bool          // an Exec never answers
	specs       []sandbox.Spec
}

var pooled atomic.Pointer[poolBackend]

func init() {
	sandbox.Register(sandbox.Registration{Name: "t-pool", New: func(sandbox.Settings) (sandbox.Backend, error) { return pooled.Load(), nil }})
}

func (b *poolBackend) Name() string { return "t-pool" }
func (b *poolBackend) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: sandbox.IsolationProcess}
}
func (b *poolBackend) Health(context.Context) sandbox.Health {
	return sandbox.Health{Available: true, Ready: true, Reason: "ok"}
}

func (b *poolBackend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	b.mu.Lock()
	delay, fail := b.createDelay, b.failPooled && spec.Limits.Wall > function.MaxTimeout
	b.mu.Unlock()
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if fail {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "create_failed", "no sandbox today")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.made++
	b.live++
	b.specs = append(b.specs, spec)
	return &poolBox{b: b, id: fmt.Sprintf("box%d", b.made), closed: make(chan struct{})}, nil
}

func (b *poolBackend) counts() (made, live int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.made, b.live
}

type poolBox struct {
	b      *poolBackend
	id     string
	once   sync.Once
	closed chan struct{}
}

func (x *poolBox) ID() string                                          { return x.id }
func (x *poolBox) WriteFiles(context.Context, map[string][]byte) error { return nil }
func (x *poolBox) Artifacts(context.Context) (sandbox.Artifacts, error) {
	return sandbox.Artifacts{}, nil
}
func (x *poolBox) Memory() (int64, error) { return x.b.mem, nil }

func (x *poolBox) Close(context.Context) error {
	x.once.Do(func() {
		close(x.closed)
		x.b.mu.Lock()
		x.b.live--
		x.b.mu.Unlock()
	})
	return nil
}

func (x *poolBox) Exec(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	read := make(chan struct{})
	go func() {
		if p.Stdin != nil {
			io.Copy(io.Discard, p.Stdin)
		}
		close(read)
	}()
	var die <-chan time.Time
	if x.b.dieAfter > 0 {
		die = time.After(x.b.dieAfter)
	}
	end := func(r sandbox.Reason) (*sandbox.Result, error) {
		return &sandbox.Result{ID: x.id, Backend: "t-pool", Reason: r, ExitCode: -1, Signal: "SIGKILL"}, nil
	}
	select {
	case <-read:
	case <-die:
		return &sandbox.Result{ID: x.id, Backend: "t-pool", Reason: sandbox.ReasonExited, ExitCode: 1}, nil
	case <-ctx.Done():
		return end(sandbox.ReasonCanceled)
	case <-x.closed:
		return end(sandbox.ReasonCanceled)
	}
	if x.b.hang {
		select {
		case <-ctx.Done():
		case <-x.closed:
		}
		return end(sandbox.ReasonCanceled)
	}
	return &sandbox.Result{ID: x.id, Backend: "t-pool", Reason: sandbox.ReasonExited,
		Stdout: `{"ok":true,"data":"` + x.id + `","stdout":"","stdout_truncated":false}` + "\n"}, nil
}

// poolEngine starts an engine on a fresh poolBackend b with pools o of
// the Python function runner, as the daemon sets them.
func poolEngine(t *testing.T, b *poolBackend, o PoolOptions) *Engine {
	t.Helper()
	pooled.Store(b)
	e, err := New(Options{Backend: "t-pool", Backends: []string{"t-pool"}, Pools: o})
	if err != nil {
		t.Fatal(err)
	}
	spec, args := function.Template(function.Python, fnOptions)
	if err := e.Pool(PoolTemplate{Name: "python", Spec: spec, Args: args, MaxCall: function.MaxTimeout}); err != nil {
		t.Fatal(err)
	}
	e.Start()
	t.Cleanup(e.Close)
	return e
}

// fnOptions are the tests' function executors'.
var fnOptions = function.Options{Concurrency: 8}

// executors are the function executors over engines (fns), one each.
var executors sync.Map

// fns is the function executor over e, as the daemon makes one: calls
// and lints through e.Call.
func fns(e *Engine) *function.Executor {
	if fx, ok := executors.Load(e); ok {
		return fx.(*function.Executor)
	}
	fx, err := function.New(function.EngineFunc(e.Call), fnOptions)
	if err != nil {
		panic(err)
	}
	got, _ := executors.LoadOrStore(e, fx)
	return got.(*function.Executor)
}

// waitPool waits until the pool has ready sandboxes ready, and returns
// its stats.
func waitPool(t *testing.T, e *Engine, ready int) PoolStats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps := e.Pools().Pools
		if len(ps) == 1 && ps[0].Ready == ready && ps[0].Filling == 0 {
			return ps[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not reach %d ready: %+v", ready, ps)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func call(e *Engine, timeout time.Duration) *function.Response {
	return fns(e).Execute(context.Background(), &function.Request{Code: "def main(): pass", Timeout: function.Duration(timeout)})
}

// TestPoolServesEachCallAFreshSandbox: every call takes a sandbox of its
// own from the pool (never one another call used), made with the limits a
// cold call gets but for the wall, and the pool refills; Close removes
// every pooled sandbox.
func TestPoolServesEachCallAFreshSandbox(t *testing.T) {
	b := &poolBackend{mem: sandbox.MiB}
	e := poolEngine(t, b, PoolOptions{Size: 2})
	seen := map[string]bool{}
	for range 5 {
		waitPool(t, e, 2)
		r := call(e, 0)
		if !r.OK {
			t.Fatalf("call: %+v", r)
		}
		if seen[string(r.Data)] {
			t.Fatalf("sandbox %s served two calls", r.Data)
		}
		seen[string(r.Data)] = true
	}
	st := waitPool(t, e, 2)
	if st.Hits != 5 || st.Misses != 0 || st.Made != 7 || st.IdleMemory != 2*sandbox.MiB {
		t.Errorf("stats %+v, want 5 hits, no miss, 7 made, 2 MiB idle", st)
	}
	b.mu.Lock()
	spec := b.specs[0]
	b.mu.Unlock()
	want, _ := e.Limits(sandbox.Limits{Output: sandbox.MiB})
	if spec.Limits.Wall != 10*time.Minute+function.MaxTimeout+poolMargin || spec.Limits.Memory != want.Memory || spec.Limits.Pids != want.Pids {
		t.Errorf("pooled spec %+v, want a cold call's limits with the pool's wall", spec.Limits)
	}
	e.Close()
	if made, live := b.counts(); live != 0 || made != 7 {
		t.Errorf("after Close: %d of %d sandboxes left", live, made)
	}
}

// TestPoolOff: with size 0 there are no pools and calls start cold.
func TestPoolOff(t *testing.T) {
	b := &poolBackend{}
	e := poolEngine(t, b, PoolOptions{Size: 0})
	time.Sleep(100 * time.Millisecond)
	if r := call(e, 0); !r.OK {
		t.Fatalf("call: %+v", r)
	}
	if made, live := b.counts(); made != 1 || live != 0 || len(e.Pools().Pools) != 0 {
		t.Errorf("size 0: %d made, %d live, pools %+v", made, live, e.Pools())
	}
}

// TestPoolBurstDrainsAndRefills: a burst larger than the pool takes every
// ready sandbox and starts the rest cold, all answered; the pool then
// refills.
func TestPoolBurstDrainsAndRefills(t *testing.T) {
	b := &poolBackend{createDelay: 300 * time.Millisecond}
	e := poolEngine(t, b, PoolOptions{Size: 2})
	waitPool(t, e, 2)
	var wg sync.WaitGroup
	var ok atomic.Int32
	for range 6 {
		wg.Go(func() {
			if r := call(e, 0); r.OK {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 6 {
		t.Fatalf("%d of 6 calls answered ok", ok.Load())
	}
	st := waitPool(t, e, 2)
	if st.Hits != 2 || st.Misses != 4 {
		t.Errorf("stats %+v, want 2 hits and 4 misses", st)
	}
}

// TestPoolTimeoutAndCancel: a call that does not answer is ended at its
// timeout (code timeout, not interrupted), and one whose caller goes away
// is interrupted; neither sandbox is used again.
func TestPoolTimeoutAndCancel(t *testing.T) {
	b := &poolBackend{hang: true}
	e := poolEngine(t, b, PoolOptions{Size: 1})
	waitPool(t, e, 1)
	start := time.Now()
	r := call(e, time.Second)
	if r.OK || r.Code != function.CodeTimeout || time.Since(start) < time.Second || time.Since(start) > 5*time.Second {
		t.Fatalf("a hanging call after %v: %+v", time.Since(start), r)
	}
	waitPool(t, e, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	r = fns(e).Execute(ctx, &function.Request{Code: "def main(): pass"})
	if r.OK || r.Code != function.CodeInterrupted {
		t.Fatalf("a cancelled call: %+v", r)
	}
	if st := waitPool(t, e, 1); st.Hits != 2 || st.Made != 3 {
		t.Errorf("stats %+v, want 2 hits and 3 made", st)
	}
}

// TestPoolIdleMemoryCap: no sandbox is made that would take the idle
// pools past max_idle_memory, on both sides of the bound (the first counts
// at its memory limit until one is measured).
func TestPoolIdleMemoryCap(t *testing.T) {
	for _, c := range []struct {
		cap   int64
		ready int
	}{{399 * sandbox.MiB, 3}, {400 * sandbox.MiB, 4}, {255 * sandbox.MiB, 0}, {256 * sandbox.MiB, 2}} {
		t.Run(sandbox.FormatSize(c.cap), func(t *testing.T) {
			b := &poolBackend{mem: 100 * sandbox.MiB}
			e := poolEngine(t, b, PoolOptions{Size: 8, MaxIdleMemory: c.cap})
			st := waitPool(t, e, c.ready)
			if st.IdleMemory > c.cap {
				t.Errorf("idle memory %d over the cap %d", st.IdleMemory, c.cap)
			}
		})
	}
}

// TestPoolLostAndExpiredAreReplaced: a ready sandbox whose runner ends by
// itself is dropped (lost) and replaced, and so is one that waited
// max_age; observers hear of both.
func TestPoolLostAndExpiredAreReplaced(t *testing.T) {
	t.Run("lost", func(t *testing.T) {
		b := &poolBackend{dieAfter: 100 * time.Millisecond}
		e := poolEngine(t, b, PoolOptions{Size: 1})
		lost := poolEvents(e, PoolLost)
		// Made at 0, lost at 0.1 s, made again after a 1 s back-off (at
		// the next tick), lost again: not made again and again.
		first, second := lost.next(t), lost.next(t)
		st := e.Pools().Pools[0]
		if gap := second.Sub(first); gap < 900*time.Millisecond {
			t.Errorf("two sandboxes lost %v apart: the lost one was replaced with no back-off", gap)
		}
		if st.Lost < 2 || st.Made < st.Lost || st.Made > 3 || !strings.Contains(st.Error, "runner ended") {
			t.Errorf("stats %+v: want the ended ones lost and replaced, with a back-off", st)
		}
		if made, live := b.counts(); live > 1 {
			t.Errorf("%d of %d sandboxes live, want at most the pool's 1", live, made)
		}
	})
	t.Run("expired", func(t *testing.T) {
		b := &poolBackend{}
		e := poolEngine(t, b, PoolOptions{Size: 1, MaxAge: 500 * time.Millisecond})
		expired := poolEvents(e, PoolExpired)
		waitPool(t, e, 1)
		expired.next(t)
		st := waitPool(t, e, 1)
		if st.Made < 2 {
			t.Errorf("stats %+v: want the expired one replaced", st)
		}
		// The expired one is closed in the background.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			made, live := b.counts()
			if live == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d sandboxes live, want the pool's 1", live, made)
			}
		}
	})
}

// TestPoolFailureBacksOff: a pool whose sandboxes cannot be made says why,
// retries with a growing delay (not in a loop), and calls start cold.
func TestPoolFailureBacksOff(t *testing.T) {
	b := &poolBackend{failPooled: true}
	e := poolEngine(t, b, PoolOptions{Size: 2})
	failed := poolEvents(e, PoolFailed)
	// Failed at 0, again after 1 s, again after 2 more.
	first, second := failed.next(t), failed.next(t)
	if gap := second.Sub(first); gap < 900*time.Millisecond {
		t.Errorf("two failures %v apart: no back-off", gap)
	}
	if r := call(e, 0); !r.OK {
		t.Fatalf("a call with no pooled sandbox: %+v", r)
	}
	st := e.Pools().Pools[0]
	if st.Error == "" || st.Ready != 0 || st.Misses != 1 {
		t.Errorf("stats %+v: want the error, no ready one, one miss", st)
	}
}

// eventTimes are when an engine's pools announced one kind of event.
type eventTimes chan time.Time

// poolEvents starts recording when e's pools announce event (from now on).
func poolEvents(e *Engine, event string) eventTimes {
	ch := make(eventTimes, 64)
	e.ObservePools(func(ev PoolEvent) {
		if ev.Event == event {
			select {
			case ch <- time.Now():
			default:
			}
		}
	})
	return ch
}

// next waits for the next event (up to 30 s: a stalled pool).
func (ch eventTimes) next(t *testing.T) time.Time {
	t.Helper()
	select {
	case at := <-ch:
		return at
	case <-time.After(30 * time.Second):
		t.Fatal("the pool announced no such event in 30 s")
		return time.Time{}
	}
}

// TestPoolOnlyForFunctionCalls: a run (even of the same program) never
// takes a pooled sandbox.
func TestPoolOnlyForFunctionCalls(t *testing.T) {
	b := &poolBackend{}
	e := poolEngine(t, b, PoolOptions{Size: 1})
	waitPool(t, e, 1)
	_, args := function.Template(function.Python, fnOptions)
	res, err := e.Run(context.Background(), sandbox.Selection{}, sandbox.Spec{}, &sandbox.Process{Args: args, Stdin: nil})
	if err != nil || res.Reason != sandbox.ReasonExited {
		t.Fatalf("run: %+v %v", res, err)
	}
	if st := waitPool(t, e, 1); st.Hits != 0 || st.Misses != 0 {
		t.Errorf("a run touched the pool: %+v", st)
	}
}

// TestPoolOptionsBounds: the options' bounds, both sides.
func TestPoolOptionsBounds(t *testing.T) {
	for _, c := range []struct {
		o  PoolOptions
		ok bool
	}{
		{PoolOptions{Size: 64}, true}, {PoolOptions{Size: 65}, false}, {PoolOptions{Size: -1}, false},
		{PoolOptions{Size: 1, Refill: 16}, true}, {PoolOptions{Size: 1, Refill: 17}, false},
		{PoolOptions{Size: 1, Backends: []string{"nope"}}, false},
	} {
		pooled.Store(&poolBackend{})
		e, err := New(Options{Backend: "t-pool", Backends: []string{"t-pool"}, Pools: c.o})
		if (err == nil) != c.ok {
			t.Errorf("%+v: error %v", c.o, err)
		}
		if e != nil {
			e.Close()
		}
	}
}

// TestPoolTemplates: Pool takes its templates once, each with a name of
// its own, a command and a longest call.
func TestPoolTemplates(t *testing.T) {
	pooled.Store(&poolBackend{})
	e, err := New(Options{Backend: "t-pool", Backends: []string{"t-pool"}, Pools: PoolOptions{Size: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ok := PoolTemplate{Name: "a", Args: []string{"x"}, MaxCall: time.Second}
	for _, bad := range [][]PoolTemplate{
		{{Args: ok.Args, MaxCall: ok.MaxCall}}, {{Name: "a", MaxCall: ok.MaxCall}}, {{Name: "a", Args: ok.Args}}, {ok, ok},
	} {
		if err := e.Pool(bad...); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("Pool(%+v) = %v, want invalid", bad, err)
		}
	}
	if err := e.Pool(ok, PoolTemplate{Name: "b", Args: ok.Args, MaxCall: ok.MaxCall}); err != nil {
		t.Fatalf("Pool of two templates: %v", err)
	}
	if err := e.Pool(ok); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("Pool a second time = %v, want invalid", err)
	}
}
