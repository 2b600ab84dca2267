package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/sandbox"
)

// A body must keep coming (issue 33): one that trickles in holds its
// connection, its token's place and, for an upload, an upload slot. The
// server waits for each Options.MinBodyRate × Options.BodyTimeout bytes of
// a body (a chunk) at most BodyTimeout. Only the time spent waiting in the
// body's reads counts: time the handler spends elsewhere (writing a file
// into the sandbox, between parts) measures the server, not the sender.
//
// Every authenticated request's body is paced (serving): once behind the
// minimum rate its connection is evictable at the connection bounds like
// an idle one (conns.go). An upload's body is also held to it (enforce):
// each read gets a deadline at the end of its chunk's wait, so a body that
// falls behind is cut, 408 body_timeout. Smaller bodies (JSON, terminal
// input) are read whole within BodyTimeout.

// paceSlack is how far behind the minimum rate a body may fall before its
// connection loses its shield from eviction: a second, so that the pause
// before a chunk's first bytes never counts.
const paceSlack = time.Second

// pacedBody is a request body that counts how long the server waits for
// it. Safe for concurrent use: the connection limiter asks lagging while a
// handler reads.
type pacedBody struct {
	io.ReadCloser
	rate   int64         // bytes per second
	window time.Duration // the wait one chunk may take
	chunk  int64         // rate × window

	mu      sync.Mutex
	rc      *http.ResponseController // set by enforce: each read gets a deadline
	got     int64                    // bytes of the current chunk
	waited  time.Duration            // waited for them, in reads that returned
	reading time.Time                // when the read in progress began; zero: none
	ended   bool                     // the body ended (EOF or an error)
}

func (s *Server) pace(body io.ReadCloser) *pacedBody {
	r, w := s.opts.MinBodyRate, s.opts.BodyTimeout
	return &pacedBody{ReadCloser: body, rate: r, window: w, chunk: max(1, int64(float64(r)*w.Seconds()))}
}

// enforce holds the body to the minimum rate with read deadlines (rc is
// the request's): a read that would wait past its chunk's window fails
// with a *slowBody. The caller calls done once it has what it needs.
func (b *pacedBody) enforce(rc *http.ResponseController) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rc = rc
}

// done stops enforcing and clears the read deadline, so that nothing of
// this body's is left on the connection.
func (b *pacedBody) done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rc != nil {
		b.rc.SetReadDeadline(time.Time{})
		b.rc = nil
	}
}

func (b *pacedBody) Read(p []byte) (int, error) {
	start := time.Now()
	b.mu.Lock()
	if b.rc != nil {
		// The read may wait what is left of its chunk's window.
		b.rc.SetReadDeadline(start.Add(b.window - b.waited))
	}
	b.reading = start
	b.mu.Unlock()

	n, err := b.ReadCloser.Read(p)

	b.mu.Lock()
	defer b.mu.Unlock()
	b.reading = time.Time{}
	b.waited += time.Since(start)
	if b.got += int64(n); b.got >= b.chunk {
		// A chunk came in time: the next one's wait starts.
		b.got, b.waited = 0, 0
	}
	if err != nil {
		b.ended = true
		var ne net.Error
		if b.rc != nil && errors.As(err, &ne) && ne.Timeout() {
			err = &slowBody{rate: b.rate, window: b.window, got: b.got}
		}
		if err == io.EOF && b.rc != nil {
			b.rc.SetReadDeadline(time.Time{})
			b.rc = nil
		}
	}
	return n, err
}

// lagging reports whether the body is behind the minimum rate: the server
// has waited for its current chunk more than paceSlack longer than the
// bytes it brought would take at that rate.
func (b *pacedBody) lagging(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return false
	}
	w := b.waited
	if !b.reading.IsZero() {
		w += now.Sub(b.reading)
	}
	due := time.Duration(float64(b.got) / float64(b.rate) * float64(time.Second))
	return w > due+paceSlack
}

// slowBody is the error of a body cut for coming slower than the minimum
// rate.
type slowBody struct {
	rate   int64
	window time.Duration
	got    int64 // bytes of the chunk it failed
}

func (e *slowBody) Error() string {
	return fmt.Sprintf("the body came slower than %s per second (server.min_body_rate): %d bytes in %s of waiting, want %d",
		sandbox.FormatSize(e.rate), e.got, e.window, int64(float64(e.rate)*e.window.Seconds()))
}

// bodyError describes a failure to read a paced body: a body cut for
// coming too slowly is 408 body_timeout saying so; anything else as
// readError says. The connection closes after the answer.
func (s *Server) bodyError(w http.ResponseWriter, err error) error {
	var slow *slowBody
	if errors.As(err, &slow) {
		w.Header().Set("Connection", "close")
		return v1.ProblemFor(http.StatusRequestTimeout, v1.CodeBodyTimeout, "%s", slow.Error())
	}
	return s.readError(w, err)
}

// paced returns the body of r, a request of a route that needs a token
// (serving paced it), held to the minimum rate (enforce).
func paced(w http.ResponseWriter, r *http.Request) *pacedBody {
	b := r.Body.(*pacedBody)
	b.enforce(http.NewResponseController(w))
	return b
}
