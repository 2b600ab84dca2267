package auth

import (
	"math"
	"sync"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// CodeAuthThrottled: the remote address failed to authenticate too often
// (ErrBusy; HTTP answers it 429 with Retry-After).
const CodeAuthThrottled = "auth_throttled"

// maxFailureAddrs bounds how many remote addresses the failure limiter
// remembers: past it, addresses whose budget has refilled are forgotten
// first, then the least recently seen.
const maxFailureAddrs = 4096

// failures is a token bucket of failed authentications per remote
// address: each failure takes one; an empty bucket refuses the address's
// requests before their token is looked at.
type failures struct {
	rate, burst float64
	now         func() time.Time

	mu    sync.Mutex
	addrs map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newFailures(rate float64, burst int) *failures {
	if rate <= 0 {
		return nil
	}
	b := float64(burst)
	if b <= 0 {
		b = math.Max(1, math.Ceil(rate))
	}
	return &failures{rate: rate, burst: b, now: time.Now, addrs: map[string]*bucket{}}
}

// refill brings b up to now; the caller holds f.mu.
func (f *failures) refill(b *bucket, now time.Time) {
	b.tokens = math.Min(f.burst, b.tokens+now.Sub(b.last).Seconds()*f.rate)
	b.last = now
}

// check refuses addr while its bucket is empty.
func (f *failures) check(addr string) error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.addrs[addr]
	if !ok {
		return nil
	}
	now := f.now()
	f.refill(b, now)
	if b.tokens >= 1 {
		return nil
	}
	wait := time.Duration((1 - b.tokens) / f.rate * float64(time.Second))
	return &BusyError{After: wait, Err: sandbox.Errorf(sandbox.ErrBusy, CodeAuthThrottled,
		"too many failed authentications from this address; retry in %s", wait.Round(time.Millisecond))}
}

// failed takes one from addr's bucket.
func (f *failures) failed(addr string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	b, ok := f.addrs[addr]
	if !ok {
		if len(f.addrs) >= maxFailureAddrs {
			f.forget(now)
		}
		b = &bucket{tokens: f.burst, last: now}
		f.addrs[addr] = b
	}
	f.refill(b, now)
	b.tokens = math.Max(0, b.tokens-1)
}

// forget drops the addresses whose budget has refilled, or else the least
// recently seen one; the caller holds f.mu.
func (f *failures) forget(now time.Time) {
	var oldest string
	var at time.Time
	for addr, b := range f.addrs {
		if f.refill(b, now); b.tokens >= f.burst {
			delete(f.addrs, addr)
			continue
		}
		if oldest == "" || b.last.Before(at) {
			oldest, at = addr, b.last
		}
	}
	if len(f.addrs) >= maxFailureAddrs {
		delete(f.addrs, oldest)
	}
}
