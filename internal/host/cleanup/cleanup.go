package cleanup

// Cleanup holds the undo steps of a setup in progress. Its zero value is
// ready to use.
type Cleanup struct {
	undo []func()
}

// Make returns a Cleanup holding f (none when f is nil).
func Make(f func()) Cleanup {
	var c Cleanup
	c.Add(f)
	return c
}

// Add adds f, to run before every function added earlier. A nil f is
// ignored.
func (c *Cleanup) Add(f func()) {
	if f != nil {
		c.undo = append(c.undo, f)
	}
}

// Clean runs the functions added since the last Release, newest first,
// and forgets them. It is meant to be deferred.
func (c *Cleanup) Clean() {
	undo := c.undo
	c.undo = nil
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
}

// Release forgets the functions without running them, so a deferred Clean
// does nothing, and returns a func that runs them (newest first) for a
// caller that takes over their ownership.
func (c *Cleanup) Release() func() {
	r := Cleanup{undo: c.undo}
	c.undo = nil
	return r.Clean
}
