package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
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
	if st[0].Ratio != 1 || st[1].Ratio < 2.5 || st[1].P50 < 8 || st[1].P99 < st[1].P50 {
		t.Errorf("stats: %v / %v, ratio %.2f", st[0], st[1], st[1].Ratio)
	}
}

// TestThroughput counts the calls made in the time given.
func TestThroughput(t *testing.T) {
	s := Subject{Name: "x", Call: func(context.Context) error { time.Sleep(10 * time.Millisecond); return nil }}
	r := Throughput(context.Background(), s, 2, 300*time.Millisecond)
	if r.Calls < 40 || r.Calls > 70 || r.PerSecond < 130 || r.PerSecond > 210 {
		t.Errorf("2 callers of a 10 ms call for 300 ms: %+v", r)
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
