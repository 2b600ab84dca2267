package sandbox

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestLifecycleBeginAfterClose(t *testing.T) {
	var l Lifecycle
	if err := l.Begin("sb1", nil); err != nil {
		t.Fatalf("Begin before Close: %v", err)
	}
	l.Done()
	if !l.Close() {
		t.Fatal("first Close returned false")
	}
	err := l.Begin("sb1", nil)
	if !errors.Is(err, ErrNotFound) || CodeOf(err) != "sandbox_closed" {
		t.Fatalf("Begin after Close = %v (code %q); want ErrNotFound sandbox_closed", err, CodeOf(err))
	}
	if l.Close() {
		t.Fatal("second Close returned true")
	}
}

func TestLifecycleCloseCancelsAndWaits(t *testing.T) {
	var l Lifecycle
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := l.Begin("sb2", cancel); err != nil {
		t.Fatal(err)
	}
	var ended atomic.Bool
	go func() {
		<-ctx.Done() // the "Exec" runs until Close cancels it
		time.Sleep(50 * time.Millisecond)
		ended.Store(true)
		l.Done()
	}()
	// A plain operation (no cancel) registered alongside.
	if err := l.Begin("sb2", nil); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		l.Done()
	}()
	done := make(chan bool)
	go func() { done <- l.Close() }()
	select {
	case first := <-done:
		if !first {
			t.Fatal("first Close returned false")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return: the running operation was not canceled")
	}
	if ctx.Err() == nil {
		t.Fatal("Close did not cancel the running Exec's context")
	}
	if !ended.Load() {
		t.Fatal("Close returned before the operation called Done")
	}
	if l.Close() {
		t.Fatal("second Close returned true")
	}
}

func TestLifecycleConcurrentClose(t *testing.T) {
	var l Lifecycle
	results := make(chan bool, 8)
	for range 8 {
		go func() {
			if l.Begin("sb3", nil) == nil {
				l.Done()
			}
			results <- l.Close()
		}()
	}
	firsts := 0
	for range 8 {
		if <-results {
			firsts++
		}
	}
	if firsts != 1 {
		t.Fatalf("%d Close calls returned true; want exactly 1", firsts)
	}
}

// One Exec at a time: a second BeginExec while one runs is ErrBusy
// "sandbox_busy"; once the first ends, the next is accepted. Other
// operations run alongside an Exec.
func TestLifecycleOneExecAtATime(t *testing.T) {
	var l Lifecycle
	end, err := l.BeginExec("sb4", func() {})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.BeginExec("sb4", func() {})
	if !errors.Is(err, ErrBusy) || CodeOf(err) != "sandbox_busy" {
		t.Fatalf("second BeginExec = %v (code %q); want ErrBusy sandbox_busy", err, CodeOf(err))
	}
	if err := l.Begin("sb4", nil); err != nil {
		t.Fatalf("Begin alongside an Exec: %v", err)
	}
	l.Done()
	end()
	end() // a second call does nothing
	end2, err := l.BeginExec("sb4", func() {})
	if err != nil {
		t.Fatalf("BeginExec after the first ended: %v", err)
	}
	end2()
	if !l.Close() {
		t.Fatal("Close returned false")
	}
	if _, err := l.BeginExec("sb4", func() {}); !errors.Is(err, ErrNotFound) || CodeOf(err) != "sandbox_closed" {
		t.Fatalf("BeginExec after Close = %v; want ErrNotFound sandbox_closed", err)
	}
}

// Close cancels an Exec registered with BeginExec and waits for its end.
func TestLifecycleCloseEndsBeginExec(t *testing.T) {
	var l Lifecycle
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	end, err := l.BeginExec("sb5", cancel)
	if err != nil {
		t.Fatal(err)
	}
	var ended atomic.Bool
	go func() {
		<-ctx.Done()
		ended.Store(true)
		end()
	}()
	if !l.Close() {
		t.Fatal("Close returned false")
	}
	if !ended.Load() {
		t.Fatal("Close returned before the Exec ended")
	}
}

// TestLifecycleCloseEndsBeginOp: Close cancels the context of a running
// BeginOp (cause sandbox_closed) and waits for its end; afterwards
// BeginOp refuses.
func TestLifecycleCloseEndsBeginOp(t *testing.T) {
	var l Lifecycle
	ctx, end, err := l.BeginOp(context.Background(), "sb")
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond)
		close(ended)
		end()
		end() // a second end does nothing
	}()
	if !l.Close() {
		t.Fatal("Close reported false")
	}
	select {
	case <-ended:
	default:
		t.Fatal("Close returned before the operation ended")
	}
	if c := CodeOf(context.Cause(ctx)); c != "sandbox_closed" {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
	if _, _, err := l.BeginOp(context.Background(), "sb"); CodeOf(err) != "sandbox_closed" {
		t.Fatalf("BeginOp after Close: %v", err)
	}
	// An operation that has ended has a done context, and Close does not
	// wait for it.
	var l2 Lifecycle
	ctx2, end2, _ := l2.BeginOp(context.Background(), "sb2")
	end2()
	if ctx2.Err() == nil {
		t.Fatal("an ended operation's context is still live")
	}
	l2.Close()
}
