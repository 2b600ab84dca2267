package docker

import "time"

// tracer is told how long each step of a run took (an Engine API call, or
// a phase such as the program's stream); the benchmarks set it to break a
// run down. Nil in production.
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
