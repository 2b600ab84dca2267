package event

import (
	"sync"
	"testing"
)

func TestBusDeliversInOrderAndFilters(t *testing.T) {
	var b Bus
	all := b.Subscribe("all", 16, nil)
	mine := b.Subscribe("mine", 16, func(e *Event) bool { return e.RunID == "a" })
	for _, id := range []string{"a", "b", "a"} {
		b.Publish(Event{Type: Started, Caller: Caller{RunID: id}})
	}
	all.Close()
	mine.Close()
	var seqs []uint64
	for e := range all.C() {
		seqs = append(seqs, e.Seq)
		if e.Time.IsZero() {
			t.Error("an event without a time")
		}
	}
	if len(seqs) != 3 || seqs[0] != 1 || seqs[2] != 3 {
		t.Errorf("all got seqs %v, want 1 2 3", seqs)
	}
	n := 0
	for e := range mine.C() {
		n++
		if e.RunID != "a" {
			t.Errorf("the filtered subscriber got %+v", e)
		}
	}
	if n != 2 {
		t.Errorf("the filtered subscriber got %d events, want 2", n)
	}
}

// A subscriber that never reads loses what does not fit and never holds
// the publisher; the others get everything.
func TestBusNeverBlocks(t *testing.T) {
	var mu sync.Mutex
	drops := map[string]int{}
	b := Bus{OnDrop: func(s string) { mu.Lock(); drops[s]++; mu.Unlock() }}
	stuck := b.Subscribe("stuck", 4, nil)
	defer stuck.Close()
	reader := b.Subscribe("reader", 1, nil)
	got := make(chan int)
	go func() {
		n := 0
		for range reader.C() {
			n++
		}
		got <- n
	}()
	const total = 10000
	for range total {
		b.Publish(Event{Type: Started})
	}
	reader.Close()
	n := <-got
	if stuck.Dropped() != total-4 || drops["stuck"] != total-4 {
		t.Errorf("the stuck subscriber dropped %d (OnDrop %d), want %d", stuck.Dropped(), drops["stuck"], total-4)
	}
	if uint64(n)+reader.Dropped() != total {
		t.Errorf("the reader got %d and dropped %d of %d", n, reader.Dropped(), total)
	}
	if b.Subscribers() != 1 {
		t.Errorf("%d subscribers after one closed, want 1", b.Subscribers())
	}
	stuck.Close()
	stuck.Close() // twice is fine
}

func TestCallerValid(t *testing.T) {
	long := make([]byte, MaxCallerLen+1)
	for i := range long {
		long[i] = 'x'
	}
	for c, want := range map[Caller]string{
		{RunID: "run-1", NodeName: "plan step", ToolCallID: "call_9"}: "",
		{RunID: string(long[:MaxCallerLen])}:                          "",
		{RunID: string(long)}:                                         "run_id",
		{NodeName: "a\nb"}:                                            "node_name",
		{ToolCallID: "é"}:                                             "tool_call_id",
	} {
		field, ok := c.Valid()
		if ok != (want == "") || field != want {
			t.Errorf("%+v: Valid() = %q, %v; want %q", c, field, ok, want)
		}
	}
}
