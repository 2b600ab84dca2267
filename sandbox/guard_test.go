package sandbox

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestGuardBeginAfterClose(t *testing.T) {
	var g Guard
	if err := g.Begin("sb1", nil); err != nil {
		t.Fatalf("Begin before Close: %v", err)
	}
	g.Done()
	if !g.Close() {
		t.Fatal("first Close returned false")
	}
	err := g.Begin("sb1", nil)
	if !errors.Is(err, ErrNotFound) || CodeOf(err) != "sandbox_closed" {
		t.Fatalf("Begin after Close = %v (code %q); want ErrNotFound sandbox_closed", err, CodeOf(err))
	}
	if g.Close() {
		t.Fatal("second Close returned true")
	}
}

func TestGuardCloseCancelsAndWaits(t *testing.T) {
	var g Guard
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := g.Begin("sb2", cancel); err != nil {
		t.Fatal(err)
	}
	var ended atomic.Bool
	go func() {
		<-ctx.Done() // the "Exec" runs until Close cancels it
		time.Sleep(50 * time.Millisecond)
		ended.Store(true)
		g.Done()
	}()
	// A plain operation (no cancel) registered alongside.
	if err := g.Begin("sb2", nil); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		g.Done()
	}()
	done := make(chan bool)
	go func() { done <- g.Close() }()
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
	if g.Close() {
		t.Fatal("second Close returned true")
	}
}

func TestGuardConcurrentClose(t *testing.T) {
	var g Guard
	results := make(chan bool, 8)
	for range 8 {
		go func() {
			if g.Begin("sb3", nil) == nil {
				g.Done()
			}
			results <- g.Close()
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
