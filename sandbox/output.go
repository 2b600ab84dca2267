package sandbox

import (
	"io"
	"strings"
	"sync"
)

// captureChunk is the size of a Capture's storage chunks: what is kept is
// a list of chunks of at most this many bytes, never one slice regrown by
// append, so holding n bytes takes n bytes (plus one partial chunk), not
// the up to twice n of a grown slice and the copy made while growing it.
const captureChunk = 64 * KiB

// Capture is an io.Writer that keeps the first limit bytes written to it,
// drops the rest (the writer never fails, so the program is never blocked or
// broken by the cap) and records that it did. An optional tee receives the
// kept bytes as they arrive, for streaming (every byte, after TeeAll); its
// errors stop the tee, not the capture.
type Capture struct {
	mu        sync.Mutex
	chunks    [][]byte
	kept      int64
	limit     int64
	total     int64
	tee       io.Writer
	overflow  func()
	truncated bool
	teeAll    bool
}

// NewOutputs returns the captures of a process's stdout and stderr, each
// keeping at most limit bytes and teeing to stdout and stderr (either may
// be nil), and a channel closed once either passes limit, when kill is set
// (OutputLimitKill: the caller ends the process then).
func NewOutputs(limit int64, kill bool, stdout, stderr io.Writer) (out, errs *Capture, overflow <-chan struct{}) {
	over := make(chan struct{})
	var once sync.Once
	onOverflow := func() {
		if kill {
			once.Do(func() { close(over) })
		}
	}
	return NewCapture(limit, stdout, onOverflow), NewCapture(limit, stderr, onOverflow), over
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
	if room := c.limit - c.kept; int64(len(keep)) > room {
		keep = keep[:max(room, 0)]
		if !c.truncated {
			c.truncated = true
			if c.overflow != nil {
				defer c.overflow()
			}
		}
	}
	c.store(keep)
	tee := keep
	if c.teeAll {
		tee = p
	}
	if c.tee != nil && len(tee) > 0 {
		if _, err := c.tee.Write(tee); err != nil {
			c.tee = nil
		}
	}
	return len(p), nil
}

// TeeAll makes the tee receive every byte, not only the kept ones: the
// output of a Lasting process is a protocol its caller reads as it comes,
// bounded by the caller, not by the capture. It returns c.
func (c *Capture) TeeAll() *Capture {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.teeAll = true
	return c
}

// store appends p, which fits under the limit, to the chunks: it fills
// the last chunk before starting another, each twice the size of the one
// before (from 4 KiB, so a short output takes little) up to captureChunk,
// and never larger than what the limit leaves.
func (c *Capture) store(p []byte) {
	for len(p) > 0 {
		n := len(c.chunks)
		if n == 0 || len(c.chunks[n-1]) == cap(c.chunks[n-1]) {
			size := int64(4 * KiB)
			if n > 0 {
				size = 2 * int64(cap(c.chunks[n-1]))
			}
			size = min(size, captureChunk, c.limit-c.kept)
			c.chunks = append(c.chunks, make([]byte, 0, size))
			n++
		}
		last := c.chunks[n-1]
		k := min(cap(last)-len(last), len(p))
		c.chunks[n-1] = append(last, p[:k]...)
		c.kept += int64(k)
		p = p[k:]
	}
}

// Bytes returns a copy of what was kept.
func (c *Capture) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]byte, 0, c.kept)
	for _, ch := range c.chunks {
		out = append(out, ch...)
	}
	return out
}

// String returns what was kept as a string, copied once.
func (c *Capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	b.Grow(int(c.kept))
	for _, ch := range c.chunks {
		b.Write(ch)
	}
	return b.String()
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
