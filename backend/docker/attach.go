package docker

import (
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// channel is execbox's end of a container's keeper: the one attach
// connection that holds the container's stdin, stdout and stderr from
// before its start to its end. Commands go down stdin; the container's
// output comes up demultiplexed and goes to the run that is current, or
// nowhere. When the connection ends (the container stopped, the engine went
// away) done is closed.
type channel struct {
	hj   client.HijackedResponse
	wmu  sync.Mutex // one writer at a time
	mu   sync.Mutex // guards cur; held while output is delivered to it
	cur  *keeperRun
	done chan struct{}
}

// keeperRun is where the container's output goes during one run (or
// while a kill is acknowledged): two filters that strip the run's trailers.
type keeperRun struct {
	stdout, stderr *filter
	changed        chan struct{} // poked after each trailer
}

func newKeeperRun(tok string, stdout, stderr io.Writer) *keeperRun {
	r := &keeperRun{changed: make(chan struct{}, 1)}
	poke := func() {
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}
	r.stdout, r.stderr = newFilter(tok, stdout, poke), newFilter(tok, stderr, poke)
	return r
}

// ended reports whether both streams carried the wrapper's trailer, and
// its fields.
func (r *keeperRun) ended() (trailer, bool) {
	out, errs := r.stdout.seen(), r.stderr.seen()
	tr := trailer{work: -1}
	okOut, okErr := false, false
	for _, b := range out {
		okOut = okOut || b == ""
	}
	for _, b := range errs {
		if t, ok := parseTrailer(b); ok && !t.killed {
			tr, okErr = t, true
		}
	}
	return tr, okOut && okErr
}

// killed reports whether both streams carried the keeper's kill trailer.
func (r *keeperRun) killed() bool {
	k := func(bodies []string) bool {
		for _, b := range bodies {
			if strings.TrimSpace(b) == "k" {
				return true
			}
		}
		return false
	}
	return k(r.stdout.seen()) && k(r.stderr.seen())
}

func newChannel(hj client.HijackedResponse) *channel {
	ch := &channel{hj: hj, done: make(chan struct{})}
	go ch.demux()
	return ch
}

func (ch *channel) demux() {
	defer close(ch.done)
	stdcopy.StdCopy(stream{ch, false}, stream{ch, true}, ch.hj.Reader)
}

// stream delivers one of the container's output streams to the current run.
type stream struct {
	ch     *channel
	stderr bool
}

func (s stream) Write(p []byte) (int, error) {
	s.ch.mu.Lock()
	defer s.ch.mu.Unlock()
	switch r := s.ch.cur; {
	case r == nil:
	case s.stderr:
		r.stderr.Write(p)
	default:
		r.stdout.Write(p)
	}
	return len(p), nil
}

// attach makes r the current run; detach ends it and returns what its
// filters still held.
func (ch *channel) attach(r *keeperRun) {
	ch.mu.Lock()
	ch.cur = r
	ch.mu.Unlock()
}

func (ch *channel) detach(r *keeperRun) {
	ch.mu.Lock()
	if ch.cur == r {
		ch.cur = nil
	}
	ch.mu.Unlock()
	r.stdout.flush()
	r.stderr.flush()
}

// errChannelClosed is the error of a send after close.
var errChannelClosed = errors.New("the container's keeper channel is closed")

// send writes a command line and the data that goes with it.
func (ch *channel) send(line string, data []byte) error {
	ch.wmu.Lock()
	defer ch.wmu.Unlock()
	select {
	case <-ch.done:
		return errChannelClosed
	default:
	}
	ch.hj.Conn.SetWriteDeadline(time.Now().Add(opTimeout))
	defer ch.hj.Conn.SetWriteDeadline(time.Time{})
	if _, err := io.WriteString(ch.hj.Conn, line); err != nil {
		return err
	}
	if len(data) > 0 {
		if _, err := ch.hj.Conn.Write(data); err != nil {
			return err
		}
	}
	return nil
}

// close drops the connection; the demultiplexer ends.
func (ch *channel) close() {
	ch.hj.Close()
	<-ch.done
}

// gone reports whether the connection ended.
func (ch *channel) gone() bool {
	select {
	case <-ch.done:
		return true
	default:
		return false
	}
}
