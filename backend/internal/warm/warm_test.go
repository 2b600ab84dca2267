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
	p := New[string](Sizing{Min: 2, Max: 2}, m.alive, m.kill)
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

	none := New[string](Sizing{}, m.alive, m.kill)
	none.Refill("a", func(context.Context) (int, error) { t.Error("size 0 started one"); return 0, nil })
	none.Close()
}

// clock is a fake time that only the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// stream runs arrivals of shape "a" every gap for n arrivals against a
// pool whose starts take startTime of the clock's time, and returns how
// many of the last half were served warm, and drain, which ends the starts
// still under way, each at its time. Time moves only here.
func stream(t *testing.T, p *Pool[string, int], clk *clock, m *machines, gap, startTime time.Duration, n int) (warm int, drain func()) {
	t.Helper()
	type pending struct {
		due  time.Time
		done chan struct{}
	}
	var mu sync.Mutex
	var starts []pending
	start := func(ctx context.Context) (int, error) {
		done := make(chan struct{})
		mu.Lock()
		starts = append(starts, pending{clk.Now().Add(startTime), done})
		mu.Unlock()
		select {
		case <-done:
			return m.start(ctx)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	for i := range n {
		clk.add(gap)
		// The starts due by now end, and are waiting before the arrival.
		mu.Lock()
		var due []pending
		starts = slices.DeleteFunc(starts, func(s pending) bool {
			if !s.due.After(clk.Now()) {
				due = append(due, s)
				return true
			}
			return false
		})
		mu.Unlock()
		before := len(p.Idle("a"))
		for _, s := range due {
			close(s.done)
		}
		waitLen(t, p, "a", before+len(due))
		if _, ok := p.Take("a"); ok && i >= n/2 {
			warm++
		}
		p.Refill("a", start)
		// Every start under way has begun (its begin time is now's).
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			mu.Lock()
			n := len(starts)
			mu.Unlock()
			if n == p.Pending("a")-len(p.Idle("a")) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d starts begun, the pool has %d under way", n, p.Pending("a")-len(p.Idle("a")))
			}
		}
	}
	drain = func() {
		mu.Lock()
		left := starts
		starts = nil
		mu.Unlock()
		for _, s := range left {
			clk.add(max(0, s.due.Sub(clk.Now())))
			before := len(p.Idle("a"))
			close(s.done)
			waitLen(t, p, "a", before+1)
		}
	}
	return warm, drain
}

// TestPoolFollowsDemand: at 5 arrivals a second with starts of 2 s, a
// pool sized by demand (1..16) keeps about rate × start time (+1σ)
// machines and serves nearly every arrival warm, where a fixed one of 1
// serves few; when arrivals stop, the trimmer brings it back to its
// floor, ending the rest; the reported rate and start time are the
// stream's.
func TestPoolFollowsDemand(t *testing.T) {
	clk := &clock{now: time.Unix(1e9, 0)}
	m := &machines{dead: map[int]bool{}}
	fixed := newPool[string](Sizing{Min: 1, Max: 1}, m.alive, m.kill, clk.Now, 0)
	defer fixed.Close()
	hitsFixed, drain := stream(t, fixed, clk, m, 200*time.Millisecond, 2*time.Second, 200)
	drain()
	if hitsFixed > 30 {
		t.Fatalf("a fixed pool of 1 served %d of 100 warm: the stream does not need more machines", hitsFixed)
	}

	m2 := &machines{dead: map[int]bool{}}
	p := newPool[string](Sizing{Min: 1, Max: 16}, m2.alive, m2.kill, clk.Now, 0)
	defer p.Close()
	hits, drain := stream(t, p, clk, m2, 200*time.Millisecond, 2*time.Second, 200)
	// 40 s at 5/s, over a window of 10 s: a rate of 4.96; × 2 s is 9.9,
	// +√9.9: 13.
	sh := p.Shapes()
	if len(sh) != 1 || sh[0].Rate < 4.9 || sh[0].Rate > 5 || sh[0].Start != 2*time.Second || sh[0].Target != 13 {
		t.Fatalf("after 40 s at 5/s with starts of 2 s: %+v", sh)
	}
	if hits < 90 {
		t.Fatalf("a pool following demand served %d of the last 100 warm", hits)
	}
	t.Logf("served warm of the last 100: a fixed pool of 1 %d, following demand %d; %+v: %s", hitsFixed, hits, sh[0], sh[0].Why(p.Sizing()))
	drain()
	held := len(p.Idle("a"))

	// Silence: the rate decays, and Trim ends what is past the target.
	for range 60 {
		clk.add(time.Second)
		p.Trim()
	}
	if n := len(p.Idle("a")); n != 1 {
		t.Fatalf("a minute after the stream: %d waiting of %d, want the floor, 1", n, held)
	}
	for deadline := time.Now().Add(5 * time.Second); len(m2.killedOnes()) != held-1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the stream: %d ended of %d, want all but one", len(m2.killedOnes()), held)
		}
	}
}

// TestTrimmer: a pool of floor 0 starts one to learn the start time when
// asked for, then grows with demand to its ceiling with no other arrival
// (a start that ends starts the rest of the target), and trims by itself,
// every trim period, down to nothing when demand is gone.
func TestTrimmer(t *testing.T) {
	clk := &clock{now: time.Unix(1e9, 0)}
	m := &machines{dead: map[int]bool{}}
	p := newPool[string](Sizing{Min: 0, Max: 4}, m.alive, m.kill, clk.Now, time.Millisecond)
	defer p.Close()
	startSecond := func(context.Context) (int, error) { clk.add(time.Second); return m.start(context.Background()) }
	for range 40 { // 4 arrivals a second, starts of a second: 4+√4, so the ceiling
		p.Take("a")
		p.Refill("a", startSecond) // one; once it is timed, three more
	}
	waitLen(t, p, "a", 4)
	clk.add(time.Hour)
	waitLen(t, p, "a", 0)
}
