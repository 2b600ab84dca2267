package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/sandbox"
)

// RetryOptions say how an execution is tried again after an
// infrastructure fault: a backend that is unavailable, a sandbox that
// failed to start. Nothing is retried once the program may have started:
// not the user's errors, timeouts or limits.
type RetryOptions struct {
	// Max is how many times an execution is tried again (default 3;
	// -1: never).
	Max int
	// Backoff is the wait before the first retry (default 200 ms); each
	// next one waits twice as long, at most MaxBackoff, with jitter (a
	// random half of it added or not).
	Backoff time.Duration
}

// Bounds of retries.
const (
	maxRetries = 10
	maxBackoff = 10 * time.Second
)

func (o RetryOptions) withDefaults() RetryOptions {
	if o.Max == 0 {
		o.Max = 3
	}
	if o.Max < 0 {
		o.Max = 0
	}
	if o.Backoff == 0 {
		o.Backoff = 200 * time.Millisecond
	}
	return o
}

func (o RetryOptions) validate() error {
	if o.Max < -1 || o.Max > maxRetries || o.Backoff < 0 || o.Backoff > maxBackoff {
		return errorf(sandbox.ErrInvalid, "config_invalid", "retries: max must be within -1…%d and backoff within 0…%s", maxRetries, maxBackoff)
	}
	return nil
}

// delay is the wait before retry n (1-based): Backoff·2ⁿ⁻¹, capped, its
// upper half random.
func (o RetryOptions) delay(n int) time.Duration {
	d := o.Backoff << min(n-1, 16)
	if d <= 0 || d > maxBackoff {
		d = maxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

// Call is what an execution's events say about who asked: the request,
// the token and the caller's own ids.
type Call struct {
	event.Caller
	RequestID string
	Owner     string
	// Tool names the tool a call runs: its executions are of kind tool.
	Tool string
}

type callKey struct{}

// WithCall returns ctx carrying c for the events of the executions run
// under it.
func WithCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// WithTool returns ctx with the tool name added to its Call: its
// executions are of kind tool.
func WithTool(ctx context.Context, name string) context.Context {
	c := callOf(ctx)
	c.Tool = name
	return WithCall(ctx, c)
}

func callOf(ctx context.Context) Call {
	c, _ := ctx.Value(callKey{}).(Call)
	return c
}

// Events is the engine's event bus: executions and sessions publish their
// lifecycle on it; Subscribe to receive them.
func (e *Engine) Events() *event.Bus { return e.events }

// attempt is what one try of an execution learned.
type attempt struct {
	backend string
	iso     sandbox.Isolation
	// started is set once the program may have run: from then on a
	// failure is never retried.
	started bool
	// retryable is set by the try for a fault before the program started
	// that a later try may not meet (an unavailable backend, a sandbox
	// that failed to start).
	retryable bool
}

// selected records the backend an attempt runs on.
func (a *attempt) selected(b sandbox.Backend) {
	a.backend, a.iso = b.Name(), b.Capabilities().Isolation
}

// selectFault marks a selection error retryable when a backend may come
// back: one that is unavailable now, or none available.
func (a *attempt) selectFault(err error) error {
	switch sandbox.CodeOf(err) {
	case "backend_unavailable", "no_backend":
		a.retryable = true
	}
	return err
}

// createFault marks a sandbox that failed to start retryable: an
// unavailable technology, an internal fault, a plain error — not a spec
// the backend refused, a denial or a limit, nor the caller's own end.
func (a *attempt) createFault(err error) error {
	a.retryable = true
	for _, k := range []error{sandbox.ErrInvalid, sandbox.ErrDenied, sandbox.ErrLimit, sandbox.ErrNotFound, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, k) {
			a.retryable = false
		}
	}
	return err
}

// execute runs one execution (base says its kind, and session): try, again
// after a retryable fault (RetryOptions), publishing each attempt's start
// and its end.
func (e *Engine) execute(ctx context.Context, base event.Event, try func(ctx context.Context, a *attempt) (*sandbox.Result, error)) (*sandbox.Result, error) {
	call := callOf(ctx)
	base.Caller, base.RequestID, base.Owner = call.Caller, call.RequestID, call.Owner
	if call.Tool != "" {
		base.Kind, base.Tool = event.KindTool, call.Tool
	}
	for n := 1; ; n++ {
		ev := base
		ev.Attempt = n
		ev.Type = event.Started
		e.events.Publish(ev)
		a := &attempt{}
		start := time.Now()
		res, err := try(ctx, a)
		ev.Duration = time.Since(start)
		if a.backend != "" {
			ev.Backend, ev.Isolation = a.backend, a.iso.String()
		}
		if err == nil {
			ev.Type = event.Failed
			if res.Reason == sandbox.ReasonExited {
				ev.Type = event.Completed
				code := res.ExitCode
				ev.ExitCode = &code
			}
			ev.Backend, ev.Isolation, ev.Reason = res.Backend, res.Isolation.String(), string(res.Reason)
			e.events.Publish(ev)
			return res, nil
		}
		ev.ErrorCode, ev.Error = sandbox.CodeOf(err), err.Error()
		if a.retryable && !a.started && n <= e.opts.Retries.Max && ctx.Err() == nil {
			ev.Type, ev.Delay = event.Retrying, e.opts.Retries.delay(n)
			e.events.Publish(ev)
			t := time.NewTimer(ev.Delay)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
			}
		}
		ev.Type, ev.Delay = event.Failed, 0
		e.events.Publish(ev)
		return nil, err
	}
}
