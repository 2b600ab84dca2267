package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/sandbox"
)

// handleRun is POST /v1/runs.
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	x := s.begin(r, v1.OpRun)
	defer x.end()
	// The token's limits before the body is read, a run slot (the
	// engine's) after: a slow upload holds no slot.
	if !x.admit(w) {
		return
	}
	var req v1.RunRequest
	if err := s.decodeJSON(w, r, &req, s.opts.MaxBody); err != nil {
		x.fail(w, err)
		return
	}
	x.inFlight()
	x.entry.Code = runCode(&req)
	spec, p, err := req.Build(sandbox.Policy{})
	if err != nil {
		x.fail(w, err)
		return
	}
	if l, err := s.opts.Engine.Limits(spec.Limits); err == nil {
		x.entry.Limits = &l
	}
	sel := sandbox.Selection{Backend: req.Backend, Tier: req.Tier, MinIsolation: req.MinIsolation}
	if q := r.URL.Query().Get("stream"); q == "1" || q == "true" {
		s.streamRun(w, r, x, sel, spec, p)
		return
	}
	res, err := s.opts.Engine.Run(r.Context(), sel, spec, p)
	if err != nil {
		x.fail(w, err)
		return
	}
	res.ID = x.entry.ID
	x.ran(res)
	x.end()
	writeJSON(w, http.StatusOK, res)
}

// runCode is what a run's audit row hashes: the code, or the command as a
// JSON array.
func runCode(req *v1.RunRequest) string {
	if req.Code != "" {
		return req.Code
	}
	b, _ := json.Marshal(req.Command)
	return string(b)
}

// streamRun runs with the output teed into events, written as they come.
// The answer's headers wait for the first event, so a run refused before
// any output still gets its problem status.
func (s *Server) streamRun(w http.ResponseWriter, r *http.Request, x *execution, sel sandbox.Selection, spec sandbox.Spec, p *sandbox.Process) {
	st := &stream{w: w, sse: wantsSSE(r), notify: make(chan struct{}, 1)}
	// Backends tee only the bytes they keep; the cap holds even if one
	// did not.
	room := sandbox.Defaults.Output
	if x.entry.Limits != nil {
		room = x.entry.Limits.Output
	}
	p.Stdout = st.tee(v1.EventStdout, room)
	p.Stderr = st.tee(v1.EventStderr, room)

	type outcome struct {
		res *sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := s.opts.Engine.Run(r.Context(), sel, spec, p)
		done <- outcome{res, err}
	}()
	var out outcome
	for running := true; running; {
		select {
		case <-st.notify:
			st.pump()
		case out = <-done:
			running = false
		}
	}
	st.pump()
	st.flushCarry()
	if out.err != nil {
		if !st.started {
			x.fail(w, out.err)
			return
		}
		pr := problemOf(r, out.err)
		x.entry.ErrorCode = pr.Code
		x.end()
		pr.Instance, pr.RequestID = r.URL.Path, x.info.id
		st.write(&v1.StreamEvent{Type: v1.EventError, Error: pr})
		return
	}
	out.res.ID = x.entry.ID
	x.ran(out.res)
	x.end()
	st.write(&v1.StreamEvent{Type: v1.EventResult, Result: out.res})
}

func wantsSSE(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// stream holds output events until the handler writes them. Tee writers
// never block the program: they append and notify. What is pending is
// bounded by the run's output limit, as the sandbox's Capture tees only
// the bytes it keeps.
type stream struct {
	w       http.ResponseWriter
	sse     bool
	notify  chan struct{}
	started bool
	broken  bool // the client went away; events are dropped

	mu       sync.Mutex
	pending  []*v1.StreamEvent
	chunkers []*v1.Chunker
}

type teeWriter struct {
	st   *stream
	c    *v1.Chunker
	room int64 // bytes this stream may still pass on
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.st.mu.Lock()
	keep := p[:min(int64(len(p)), max(t.room, 0))]
	t.room -= int64(len(keep))
	if ev := t.c.Next(keep); len(keep) > 0 && ev != nil {
		t.st.pending = append(t.st.pending, ev)
	}
	t.st.mu.Unlock()
	select {
	case t.st.notify <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (st *stream) tee(typ string, room int64) *teeWriter {
	c := &v1.Chunker{Type: typ}
	st.chunkers = append(st.chunkers, c)
	return &teeWriter{st: st, c: c, room: room}
}

// pump writes the pending events.
func (st *stream) pump() {
	st.mu.Lock()
	evs := st.pending
	st.pending = nil
	st.mu.Unlock()
	for _, ev := range evs {
		st.write(ev)
	}
}

// flushCarry writes what the chunkers held back at the end.
func (st *stream) flushCarry() {
	for _, c := range st.chunkers {
		if ev := c.Flush(); ev != nil {
			st.write(ev)
		}
	}
}

func (st *stream) write(ev *v1.StreamEvent) {
	if st.broken {
		return
	}
	if !st.started {
		st.started = true
		h := st.w.Header()
		if st.sse {
			h.Set("Content-Type", "text/event-stream")
		} else {
			h.Set("Content-Type", "application/x-ndjson")
		}
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no")
		st.w.WriteHeader(http.StatusOK)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		b, _ = json.Marshal(&v1.StreamEvent{Type: v1.EventError, Error: v1.ProblemFor(http.StatusInternalServerError, "internal", "encoding an event: %v", err)})
	}
	var buf bytes.Buffer
	if st.sse {
		fmt.Fprintf(&buf, "event: %s\ndata: %s\n\n", ev.Type, b)
	} else {
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if _, err := st.w.Write(buf.Bytes()); err != nil {
		st.broken = true
		return
	}
	if err := http.NewResponseController(st.w).Flush(); err != nil {
		st.broken = true
	}
}
