package docker

import "time"

// tracer is told how long each step of a run took: each Engine API call
// (lower case: create, attach, start, stat-…, removal), each phase of the
// backend's own (run, kill, stop), and each method of the contract
// (Create, WriteFiles, Exec, Artifacts, Close), so that what lies outside
// the backend is the rest. The benchmarks set it; nil in production.
type tracer func(step string, d time.Duration)

// timed starts timing step; the returned func records it.
func (b *Backend) timed(step string) func() {
	t := b.trace.Load()
	if t == nil {
		return func() {}
	}
	start := time.Now()
	return func() { (*t)(step, time.Since(start)) }
}
