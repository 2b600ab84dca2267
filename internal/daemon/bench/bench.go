package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Subject is one way of making the measured call: bare on the host, a
// backend cold or warm, through the library or HTTP, a peer's CLI.
type Subject struct {
	Name    string // "native warm", "raw bwrap", …
	Path    string // host, library, http, cli
	Backend string // "" for the host and peers
	// Call makes one call; an error counts against the subject.
	Call func(ctx context.Context) error
	// Ready, when set, is waited for before each timed call of the latency
	// run (a warm subject: until its pool has a sandbox ready); its time
	// is not counted.
	Ready func(ctx context.Context) error
	// Throughput marks the subjects whose calls/s are measured.
	Throughput bool
}

// Stats are one subject's latencies, in milliseconds.
type Stats struct {
	Name    string  `json:"name"`
	Path    string  `json:"path"`
	Backend string  `json:"backend,omitempty"`
	Calls   int     `json:"calls"`
	Errors  int     `json:"errors"`
	P50     float64 `json:"p50_ms"`
	P90     float64 `json:"p90_ms"`
	P99     float64 `json:"p99_ms"`
	Mean    float64 `json:"mean_ms"`
	// Ratio is P50 over the bare call's P50.
	Ratio float64 `json:"ratio_to_bare"`
	// Error is the first error, when there were any.
	Error string `json:"error,omitempty"`
}

// Rate is one subject's throughput at one concurrency.
type Rate struct {
	Name        string  `json:"name"`
	Concurrency int     `json:"concurrency"`
	Calls       int     `json:"calls"`
	Errors      int     `json:"errors"`
	PerSecond   float64 `json:"calls_per_second"`
}

// Idle is what one idle pooled sandbox of a backend holds.
type Idle struct {
	Backend string `json:"backend"`
	// RSS sums the resident memory of every process of the pooled
	// sandboxes (runner, init, runsc), divided by how many there were;
	// 0 where their processes are not execbox's children (docker). It
	// counts shared pages (the binaries) once per process; PSS splits
	// them among their users, and Private counts only the sandboxes' own.
	RSS     int64 `json:"rss_bytes"`
	PSS     int64 `json:"pss_bytes"`
	Private int64 `json:"private_bytes"`
	// Cgroup is their cgroup's memory (page cache and tmpfs included),
	// per sandbox, as the pool measures it.
	Cgroup    int64 `json:"cgroup_bytes"`
	Sandboxes int   `json:"sandboxes"`
}

// Report is one benchmark run.
type Report struct {
	Time     time.Time `json:"time"`
	Host     string    `json:"host"`
	Workload string    `json:"workload"`
	Rounds   int       `json:"rounds"`
	Latency  []Stats   `json:"latency"`
	Rates    []Rate    `json:"throughput"`
	Idle     []Idle    `json:"idle"`
	// Skipped are the subjects not measured here, each with why.
	Skipped []string `json:"skipped,omitempty"`
}

// Latency calls every subject rounds times, interleaved — one call of each
// per round, each round starting one subject later — so that drift (the
// host's load, caches, CPU frequency) falls on all alike.
func Latency(ctx context.Context, subjects []Subject, rounds int) []Stats {
	times := make([][]time.Duration, len(subjects))
	errs := make([]int, len(subjects))
	first := make([]string, len(subjects))
	for r := range rounds {
		for k := range subjects {
			i := (k + r) % len(subjects)
			s := subjects[i]
			if ctx.Err() != nil {
				break
			}
			if s.Ready != nil {
				if err := s.Ready(ctx); err != nil {
					errs[i]++
					first[i] = cmp(first[i], err.Error())
					continue
				}
			}
			start := time.Now()
			err := s.Call(ctx)
			took := time.Since(start)
			if err != nil {
				errs[i]++
				first[i] = cmp(first[i], err.Error())
				continue
			}
			times[i] = append(times[i], took)
		}
	}
	out := make([]Stats, len(subjects))
	for i, s := range subjects {
		out[i] = summarize(s, times[i])
		out[i].Errors, out[i].Error = errs[i], first[i]
	}
	var bare float64
	for _, st := range out {
		if st.Path == "host" && st.P50 > 0 {
			bare = st.P50
			break
		}
	}
	for i := range out {
		if bare > 0 {
			out[i].Ratio = out[i].P50 / bare
		}
	}
	return out
}

func cmp(old, s string) string {
	if old != "" {
		return old
	}
	return s
}

func summarize(s Subject, ds []time.Duration) Stats {
	st := Stats{Name: s.Name, Path: s.Path, Backend: s.Backend, Calls: len(ds)}
	if len(ds) == 0 {
		return st
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	at := func(q float64) float64 { return ms(ds[min(int(q*float64(len(ds))), len(ds)-1)]) }
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	st.P50, st.P90, st.P99, st.Mean = at(0.5), at(0.9), at(0.99), ms(sum/time.Duration(len(ds)))
	return st
}

// Throughput makes calls of s with conc callers at once for about d and
// returns the calls completed per second.
func Throughput(ctx context.Context, s Subject, conc int, d time.Duration) Rate {
	var calls, errs atomic.Int64
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := s.Call(context.WithoutCancel(ctx)); err != nil {
					errs.Add(1)
					continue
				}
				calls.Add(1)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	return Rate{Name: s.Name, Concurrency: conc, Calls: int(calls.Load()), Errors: int(errs.Load()),
		PerSecond: float64(calls.Load()) / took.Seconds()}
}

// String is the stats in one line, for logs.
func (s Stats) String() string {
	return fmt.Sprintf("%s: p50 %.2f ms p90 %.2f p99 %.2f (%d calls, %d errors)", s.Name, s.P50, s.P90, s.P99, s.Calls, s.Errors)
}
