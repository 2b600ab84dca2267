package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/sandbox"
)

// flaky is a backend whose Create fails with err the first fail times,
// then makes sandboxes whose Exec ends with res.
type flaky struct {
	mu      sync.Mutex
	fail    int
	err     error
	res     sandbox.Result
	creates int
}

func (f *flaky) Name() string { return "t-flaky" }
func (f *flaky) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: sandbox.IsolationProcess}
}
func (f *flaky) Health(context.Context) sandbox.Health {
	return sandbox.Health{Available: true, Ready: true, Reason: "ok"}
}
func (f *flaky) Create(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates++
	if f.creates <= f.fail {
		return nil, f.err
	}
	return &flakyBox{res: f.res}, nil
}

func (f *flaky) set(fail int, err error, res sandbox.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail, f.err, f.res, f.creates = fail, err, res, 0
}

func (f *flaky) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.creates
}

type flakyBox struct {
	capturedBox
	res sandbox.Result
}

func (b *flakyBox) Exec(context.Context, *sandbox.Process) (*sandbox.Result, error) {
	r := b.res
	return &r, nil
}

var flakyBackend = &flaky{}

func init() {
	sandbox.Register(sandbox.Registration{Name: "t-flaky", New: func(sandbox.Settings) (sandbox.Backend, error) { return flakyBackend, nil }})
}

// events collects what the bus publishes until stop.
func events(t *testing.T, e *Engine) (stop func() []event.Event) {
	sub := e.Events().Subscribe("test", 1024, nil)
	var got []event.Event
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range sub.C() {
			got = append(got, ev)
		}
	}()
	return func() []event.Event {
		sub.Close()
		<-done
		return got
	}
}

func types(evs []event.Event) []string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Type)
	}
	return s
}

// Infrastructure faults are tried again, with events for each attempt;
// the program's own failures, limits and refused specs are not.
func TestRetries(t *testing.T) {
	e, err := New(Options{Backends: []string{"t-flaky"}, Backend: "t-flaky", Retries: RetryOptions{Max: 3, Backoff: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	unavailable := sandbox.Errorf(sandbox.ErrUnavailable, "engine_down", "the engine is not answering")
	exited := sandbox.Result{Reason: sandbox.ReasonExited, ExitCode: 1, Backend: "t-flaky", Isolation: sandbox.IsolationProcess}
	run := func(caller event.Caller) (*sandbox.Result, error) {
		ctx := WithCall(context.Background(), Call{Caller: caller, RequestID: "req-1", Owner: "alice"})
		spec := sandbox.Spec{}
		tk, err := e.Admit(ctx, Owner{}, sandbox.Selection{}, spec)
		if err != nil {
			t.Fatal(err)
		}
		defer tk.Release()
		return tk.Run(ctx, sandbox.Selection{}, &sandbox.Process{Args: []string{"true"}})
	}
	for _, tc := range []struct {
		name    string
		fail    int
		err     error
		res     sandbox.Result
		creates int
		want    []string
		code    string
	}{
		{"two faults, then it runs", 2, unavailable, exited, 3,
			[]string{event.Started, event.Retrying, event.Started, event.Retrying, event.Started, event.Completed}, ""},
		{"always down: 1 + 3 retries", 99, unavailable, exited, 4,
			[]string{event.Started, event.Retrying, event.Started, event.Retrying, event.Started, event.Retrying, event.Started, event.Failed}, "engine_down"},
		{"an internal fault at start", 1, errors.New("runsc: exit status 1"), exited, 2,
			[]string{event.Started, event.Retrying, event.Started, event.Completed}, ""},
		{"a refused spec is not retried", 99, sandbox.Errorf(sandbox.ErrInvalid, "spec_invalid", "no"), exited, 1,
			[]string{event.Started, event.Failed}, "spec_invalid"},
		{"a program that fails is not retried", 0, nil, exited, 1, []string{event.Started, event.Completed}, ""},
		{"a timeout is not retried", 0, nil, sandbox.Result{Reason: sandbox.ReasonTimeout, ExitCode: -1}, 1, []string{event.Started, event.Failed}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flakyBackend.set(tc.fail, tc.err, tc.res)
			stop := events(t, e)
			res, err := run(event.Caller{RunID: "r1", NodeName: "n", ToolCallID: "c"})
			evs := stop()
			if got := types(evs); !slices.Equal(got, tc.want) {
				t.Errorf("events %v, want %v", got, tc.want)
			}
			if flakyBackend.count() != tc.creates {
				t.Errorf("%d sandboxes tried, want %d", flakyBackend.count(), tc.creates)
			}
			if tc.code != "" {
				if err == nil || sandbox.CodeOf(err) != tc.code {
					t.Errorf("err %v, want code %s", err, tc.code)
				}
			} else if err != nil || res.Reason != tc.res.Reason {
				t.Errorf("res %+v err %v", res, err)
			}
			for i, ev := range evs {
				if ev.RunID != "r1" || ev.NodeName != "n" || ev.ToolCallID != "c" || ev.RequestID != "req-1" || ev.Owner != "alice" || ev.Kind != event.KindRun {
					t.Errorf("event %d does not carry the call: %+v", i, ev)
				}
				if ev.Attempt != i/2+1 {
					t.Errorf("event %d (%s): attempt %d", i, ev.Type, ev.Attempt)
				}
				switch ev.Type {
				case event.Retrying:
					if ev.Delay <= 0 || ev.ErrorCode == "" {
						t.Errorf("a retry without a delay or code: %+v", ev)
					}
				case event.Completed:
					if ev.ExitCode == nil || *ev.ExitCode != tc.res.ExitCode || ev.Backend != "t-flaky" || ev.Isolation != "process" {
						t.Errorf("completed: %+v", ev)
					}
				}
			}
		})
	}
}

// A canceled caller ends the backoff at once: no more attempts.
func TestRetryBackoffCanceled(t *testing.T) {
	e, err := New(Options{Backends: []string{"t-flaky"}, Backend: "t-flaky", Retries: RetryOptions{Max: 5, Backoff: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	flakyBackend.set(99, sandbox.Errorf(sandbox.ErrUnavailable, "engine_down", "down"), sandbox.Result{})
	ctx, cancel := context.WithCancel(context.Background())
	sub := e.Events().Subscribe("test", 16, nil)
	defer sub.Close()
	go func() {
		for ev := range sub.C() {
			if ev.Type == event.Retrying {
				cancel()
			}
		}
	}()
	start := time.Now()
	_, err = e.Run(ctx, sandbox.Selection{}, sandbox.Spec{}, &sandbox.Process{Args: []string{"true"}})
	if sandbox.CodeOf(err) != "engine_down" || time.Since(start) > 2*time.Second || flakyBackend.count() != 1 {
		t.Errorf("canceled in the backoff: err %v after %s, %d attempts; want engine_down at once after 1", err, time.Since(start), flakyBackend.count())
	}
}

func TestRetryDelay(t *testing.T) {
	o := RetryOptions{Max: 3, Backoff: 200 * time.Millisecond}
	for n, want := range map[int]time.Duration{1: 200 * time.Millisecond, 2: 400 * time.Millisecond, 3: 800 * time.Millisecond, 30: maxBackoff} {
		for range 50 {
			if d := o.delay(n); d < want/2 || d > want {
				t.Fatalf("delay(%d) = %s, want within [%s, %s]", n, d, want/2, want)
			}
		}
	}
	for _, bad := range []RetryOptions{{Max: -2}, {Max: maxRetries + 1}, {Backoff: -1}, {Backoff: maxBackoff + 1}} {
		if bad.validate() == nil {
			t.Errorf("%+v is valid", bad)
		}
	}
	if (RetryOptions{Max: -1}).withDefaults().Max != 0 || (RetryOptions{}).withDefaults().Max != 3 {
		t.Error("defaults: -1 means none, 0 the default 3")
	}
}

// A subscriber that never reads loses events and holds no run: every run
// ends, and what did not fit is counted.
func TestStuckSubscriber(t *testing.T) {
	e, err := New(Options{Backends: []string{"t-flaky"}, Backend: "t-flaky"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	flakyBackend.set(0, nil, sandbox.Result{Reason: sandbox.ReasonExited})
	stuck := e.Events().Subscribe("stuck", 4, nil)
	defer stuck.Close()
	for range 100 {
		if _, err := e.Run(context.Background(), sandbox.Selection{}, sandbox.Spec{}, &sandbox.Process{Args: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	if stuck.Dropped() != 200-4 {
		t.Errorf("dropped %d of 200 events with room for 4", stuck.Dropped())
	}
}

// BenchmarkSubscribers: a run's cost with no subscriber, one that never
// reads, and one that takes 10 ms per event — side by side. (The backend
// is a stub: what is measured is the engine's part, events included.)
func BenchmarkSubscribers(b *testing.B) {
	e, err := New(Options{Backends: []string{"t-flaky"}, Backend: "t-flaky"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	flakyBackend.set(0, nil, sandbox.Result{Reason: sandbox.ReasonExited})
	run := func(b *testing.B) {
		for b.Loop() {
			if _, err := e.Run(context.Background(), sandbox.Selection{}, sandbox.Spec{}, &sandbox.Process{Args: []string{"true"}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("none", run)
	b.Run("stuck", func(b *testing.B) {
		s := e.Events().Subscribe("stuck", 256, nil)
		defer s.Close()
		run(b)
		b.ReportMetric(float64(s.Dropped())/float64(b.N), "dropped/op")
	})
	b.Run("slow", func(b *testing.B) {
		s := e.Events().Subscribe("slow", 256, nil)
		go func() {
			for range s.C() {
				time.Sleep(10 * time.Millisecond)
			}
		}()
		defer s.Close()
		run(b)
		b.ReportMetric(float64(s.Dropped())/float64(b.N), "dropped/op")
	})
}

// A run's result says what limits it had and where each came from: the
// call, the configuration or execbox's defaults; and its backend and
// network likewise.
func TestResultSources(t *testing.T) {
	e, err := New(Options{Backends: []string{"t-flaky"}, Backend: "t-flaky", Defaults: sandbox.Limits{Memory: 300 * sandbox.MiB},
		Configured: map[string]bool{"memory": true, "backend": true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	flakyBackend.set(0, nil, sandbox.Result{Reason: sandbox.ReasonExited})
	run := func(sel sandbox.Selection, spec sandbox.Spec) *sandbox.Result {
		t.Helper()
		res, err := e.Run(context.Background(), sel, spec, &sandbox.Process{Args: []string{"true"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run(sandbox.Selection{}, sandbox.Spec{Limits: sandbox.Limits{Wall: 5 * time.Second}})
	want := map[string]string{"wall": "call", "memory": "config", "pids": "default", "output_limit_kill": "default", "backend": "config", "network": "default",
		"image": "default", "tmp_exec": "default"}
	for k, v := range want {
		if res.Sources[k] != v {
			t.Errorf("sources[%s] = %q, want %q (%v)", k, res.Sources[k], v, res.Sources)
		}
	}
	if len(res.Sources) != len(sandbox.LimitNames())+4 {
		t.Errorf("%d sources, want every limit, backend, network, image and tmp_exec: %v", len(res.Sources), res.Sources)
	}
	if res.Limits == nil || res.Limits.Wall != 5*time.Second || res.Limits.Memory != 300*sandbox.MiB {
		t.Errorf("limits %+v", res.Limits)
	}
	res = run(sandbox.Selection{Backend: "t-flaky"}, sandbox.Spec{Limits: sandbox.Limits{Memory: 64 * sandbox.MiB}, Policy: sandbox.Policy{Network: sandbox.NetworkHost, TmpExec: true}})
	if res.Sources["memory"] != "call" || res.Sources["backend"] != "call" || res.Sources["network"] != "call" || res.Sources["wall"] != "default" || res.Sources["tmp_exec"] != "call" {
		t.Errorf("sources %v", res.Sources)
	}
}

// A run, a sandbox made by Create and a session may name only a listed
// image, and only on a backend that has images: every way in refuses both
// before any sandbox is created.
func TestImages(t *testing.T) {
	e, err := New(Options{Backends: []string{"t-flaky"}, Backend: "t-flaky", Images: []string{"python:alt"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	flakyBackend.set(0, nil, sandbox.Result{Reason: sandbox.ReasonExited})
	before := flakyBackend.count()
	ways := map[string]func(spec sandbox.Spec) error{
		"Run": func(spec sandbox.Spec) error {
			_, err := e.Run(context.Background(), sandbox.Selection{}, spec, &sandbox.Process{Args: []string{"true"}})
			return err
		},
		"Create": func(spec sandbox.Spec) error {
			sb, err := e.Create(context.Background(), sandbox.Selection{}, spec)
			if err == nil {
				sb.Close(context.Background())
			}
			return err
		},
		"OpenSession": func(spec sandbox.Spec) error {
			s, err := e.OpenSession(context.Background(), Owner{}, SessionRequest{Spec: spec})
			if err == nil {
				e.CloseSession(context.Background(), Owner{}, s.ID())
			}
			return err
		},
	}
	for way, do := range ways {
		for image, code := range map[string]string{"python:other": "image_denied", "python:alt": "image_unsupported"} {
			if err := do(sandbox.Spec{Image: image}); sandbox.CodeOf(err) != code {
				t.Errorf("%s with image %s: %v, want %s", way, image, err, code)
			}
		}
	}
	if n := flakyBackend.count() - before; n != 0 {
		t.Errorf("%d sandboxes created for refused images", n)
	}
}
