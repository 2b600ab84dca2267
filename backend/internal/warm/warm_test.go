package warm

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// machines stand in for VMs and Pods: numbered, alive until killed or
// marked dead, each killed at most once.
type machines struct {
	mu     sync.Mutex
	next   int
	dead   map[int]bool
	killed []int
}

func (m *machines) start(context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	return m.next, nil
}

func (m *machines) alive(v int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.dead[v]
}

func (m *machines) kill(v int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if slices.Contains(m.killed, v) {
		panic("killed twice")
	}
	m.killed = append(m.killed, v)
}

func (m *machines) killedOnes() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.killed)
	slices.Sort(out)
	return out
}

func waitLen[K comparable, V any](t *testing.T, p *Pool[K, V], k K, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); len(p.Idle(k)) != n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting of shape %v, want %d", len(p.Idle(k)), k, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPool: Refill starts up to size per shape; Take gives them in order
// and skips (and kills) dead ones; a third shape ends the oldest shape's
// machines; Close ends the waiting ones and a start it interrupted; size
// 0 keeps nothing.
func TestPool(t *testing.T) {
	m := &machines{dead: map[int]bool{}}
	p := New[string](2, m.alive, m.kill)
	p.Refill("a", m.start)
	waitLen(t, p, "a", 2)
	if n := p.Pending("a"); n != 2 || p.Pending("b") != 0 {
		t.Fatalf("Pending = %d (b %d), want 2 and 0", n, p.Pending("b"))
	}
	p.Refill("a", m.start) // already full
	// The two starts run side by side: either may wait first.
	idle := p.Idle("a")
	if v, ok := p.Take("a"); !ok || v != idle[0] {
		t.Fatalf("Take = %d, %v; want %d, the first waiting", v, ok, idle[0])
	}
	if _, ok := p.Take("b"); ok {
		t.Fatal("Take of a shape never refilled gave a machine")
	}
	m.mu.Lock()
	m.dead[idle[1]] = true
	m.mu.Unlock()
	if v, ok := p.Take("a"); ok {
		t.Fatalf("Take gave the dead machine %d", v)
	}
	p.Refill("a", m.start)
	waitLen(t, p, "a", 2) // 3, 4
	p.Refill("b", m.start)
	waitLen(t, p, "b", 2) // 5, 6
	p.Refill("c", m.start)
	waitLen(t, p, "c", 2) // 7, 8; a's end
	if len(p.Idle("a")) != 0 || p.Len() != 4 {
		t.Fatalf("after a third shape: a %v, %d waiting", p.Idle("a"), p.Len())
	}

	blocked := make(chan struct{})
	p.Refill("b", func(ctx context.Context) (int, error) { // b is full: not called
		t.Error("start of a full shape")
		return 0, nil
	})
	tookB, _ := p.Take("b")
	p.Refill("b", func(ctx context.Context) (int, error) {
		close(blocked)
		<-ctx.Done()
		return 0, ctx.Err()
	})
	<-blocked
	p.Close()
	p.Close()
	want := []int{idle[1], 3, 4, 11 - tookB, 7, 8} // the other b of 5 and 6
	slices.Sort(want)
	if got := m.killedOnes(); !slices.Equal(got, want) {
		t.Fatalf("killed %v, want the dead one, a's, and every one waiting at Close", got)
	}
	if _, ok := p.Take("c"); ok || p.Len() != 0 {
		t.Fatal("a closed pool gave a machine")
	}

	none := New[string](0, m.alive, m.kill)
	none.Refill("a", func(context.Context) (int, error) { t.Error("size 0 started one"); return 0, nil })
	none.Close()
}
