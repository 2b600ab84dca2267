package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLatencyInterleavesAndSummarizes: every subject is called once per
// round, each round starting one later; errors are counted apart; the
// quantiles and the ratio to the host subject come out of the timings.
func TestLatencyInterleavesAndSummarizes(t *testing.T) {
	var order []string
	sleep := func(name string, d time.Duration) func(context.Context) error {
		return func(context.Context) error {
			order = append(order, name)
			time.Sleep(d)
			return nil
		}
	}
	subjects := []Subject{
		{Name: "bare", Path: "host", Call: sleep("bare", 2*time.Millisecond)},
		{Name: "slow", Path: "library", Call: sleep("slow", 8*time.Millisecond)},
		{Name: "broken", Path: "library", Call: func(context.Context) error { order = append(order, "broken"); return errors.New("no") }},
	}
	st := Latency(context.Background(), subjects, 4)
	if got := strings.Join(order[:6], " "); got != "bare slow broken slow broken bare" {
		t.Errorf("order %q: want one call of each per round, each round starting one later", got)
	}
	if st[0].Calls != 4 || st[1].Calls != 4 || st[2].Calls != 0 || st[2].Errors != 4 || st[2].Error != "no" {
		t.Errorf("counts: %+v", st)
	}
	// Sleeps last at least what they ask: the bounds below, and the ratio
	// is the p50s' (no timing threshold that a loaded host could pass).
	if st[0].Ratio != 1 || st[1].Ratio != st[1].P50/st[0].P50 || st[0].P50 < 2 || st[1].P50 < 8 || st[1].P99 < st[1].P90 || st[1].P90 < st[1].P50 {
		t.Errorf("stats: %v / %v, ratio %.2f", st[0], st[1], st[1].Ratio)
	}
}

// TestThroughput keeps conc callers busy until the time is up, counting
// calls and errors apart; calls per second are the calls over that time.
func TestThroughput(t *testing.T) {
	var n, busy, most atomic.Int32
	s := Subject{Name: "x", Call: func(context.Context) error {
		now := busy.Add(1)
		defer busy.Add(-1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		time.Sleep(5 * time.Millisecond)
		if n.Add(1)%2 == 0 {
			return errors.New("every other")
		}
		return nil
	}}
	r := Throughput(context.Background(), s, 3, 200*time.Millisecond)
	if most.Load() != 3 || int(n.Load()) != r.Calls+r.Errors || r.Calls == 0 || r.Errors < r.Calls-3 || r.Errors > r.Calls+3 {
		t.Errorf("3 callers: %+v, %d calls made, %d at once at most", r, n.Load(), most.Load())
	}
	// At least 200 ms passed, and calls were made in it.
	if r.PerSecond <= 0 || r.PerSecond > float64(r.Calls)/0.2 {
		t.Errorf("%.1f calls/s for %d calls in 200 ms or more", r.PerSecond, r.Calls)
	}
}

// TestRender: the table, the JSON and the HTML page hold every subject.
func TestRender(t *testing.T) {
	r := &Report{Workload: "w", Host: "h", Rounds: 2,
		Latency: []Stats{{Name: "bare", Path: "host", Calls: 2, P50: 10, P90: 11, P99: 12, Ratio: 1},
			{Name: "native warm", Path: "library", Calls: 2, P50: 2, P90: 3, P99: 4, Ratio: 0.2}},
		Rates: []Rate{{Name: "bare", Concurrency: 1, Calls: 10, PerSecond: 100}},
		Idle:  []Idle{{Backend: "native", RSS: 30 << 20, PSS: 15 << 20, Private: 8 << 20, Cgroup: 6 << 20, Sandboxes: 2}},
	}
	var tab, js, page bytes.Buffer
	r.Table(&tab)
	if err := r.JSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := r.HTML(&page); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"native warm", "0.20", "RSS 30.0 MiB, PSS 15.0 MiB, private 8.0 MiB", "×1"} {
		if !strings.Contains(tab.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tab.String())
		}
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Latency) != 2 || back.Idle[0].PSS != 15<<20 {
		t.Errorf("JSON: %v %+v", err, back)
	}
	if !strings.Contains(page.String(), "<svg") || strings.Count(page.String(), "<rect") != 2 || !strings.Contains(page.String(), "native warm (library)") {
		t.Errorf("HTML page:\n%s", page.String())
	}
}
