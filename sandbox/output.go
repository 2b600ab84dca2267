package sandbox

import (
	"io"
	"sync"
)

// Capture is an io.Writer that keeps the first limit bytes written to it,
// drops the rest (the writer never fails, so the program is never blocked or
// broken by the cap) and records that it did. An optional tee receives the
// kept bytes as they arrive, for streaming; its errors stop the tee, not the
// capture.
type Capture struct {
	mu        sync.Mutex
	buf       []byte
	limit     int64
	total     int64
	tee       io.Writer
	overflow  func()
	truncated bool
}

// NewCapture returns a Capture keeping at most limit bytes. overflow, if not
// nil, is called once, when the limit is first passed.
func NewCapture(limit int64, tee io.Writer, overflow func()) *Capture {
	return &Capture{limit: limit, tee: tee, overflow: overflow}
}

func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	keep := p
	if room := c.limit - int64(len(c.buf)); int64(len(keep)) > room {
		keep = keep[:max(room, 0)]
		if !c.truncated {
			c.truncated = true
			if c.overflow != nil {
				defer c.overflow()
			}
		}
	}
	c.buf = append(c.buf, keep...)
	if c.tee != nil && len(keep) > 0 {
		if _, err := c.tee.Write(keep); err != nil {
			c.tee = nil
		}
	}
	return len(p), nil
}

// Bytes returns a copy of what was kept.
func (c *Capture) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf...)
}

// Truncated reports whether anything was dropped.
func (c *Capture) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.truncated
}

// Total is how many bytes were written, kept or not.
func (c *Capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}
