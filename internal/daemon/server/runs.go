package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/guard"
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
	x.entry.CodeSHA256 = runHash(&req)
	spec, p, err := req.Build(sandbox.Policy{})
	if err != nil {
		x.fail(w, err)
		return
	}
	// The slot and the result memory are held until the answer is
	// written (or the client is gone, or the write deadline passed): a
	// result no one reads still counts against max_runs and
	// max_result_memory.
	owner := s.owner(x.info.identity)
	if spec.Scope != "" {
		// A scope shares a reused environment: never across tokens.
		spec.Scope = owner.Name + "/" + spec.Scope
	}
	// The spec is checked (limits over their maxima, invalid ones) before
	// the guard is asked: an operator never approves a call that cannot
	// run.
	plan, err := s.opts.Engine.Plan(spec)
	if err != nil {
		if c := sandbox.CodeOf(err); c == "limit_too_high" || c == "limit_invalid" {
			err = &v1.FieldError{Field: "limits", Err: err}
		}
		x.fail(w, err)
		return
	}
	sel := sandbox.Selection{Backend: req.Backend, Tier: req.Tier, MinIsolation: req.MinIsolation}
	if !x.check(w, guard.Call{Language: runLanguage(req.Code, req.Language)}, &sel) {
		return
	}
	t, err := plan.Admit(r.Context(), owner, sel)
	if err != nil {
		x.fail(w, err)
		return
	}
	defer t.Release()
	l := t.Limits()
	x.entry.Limits = &l
	if q := r.URL.Query().Get("stream"); q == "1" || q == "true" {
		s.streamRun(w, r, x, t.Limits().Output, func(ctx context.Context) (*sandbox.Result, error) { return t.Run(ctx, sel, p) }, p, runCode(req.Code, req.Command))
		return
	}
	res, err := t.Run(r.Context(), sel, p)
	if err != nil {
		x.fail(w, err)
		return
	}
	s.answerResult(w, r, x, res, runCode(req.Code, req.Command))
}

// runLanguage is what the guard's rules see as a run's language: the
// code's, or "command" for a command.
func runLanguage(code, language string) string {
	switch {
	case code == "":
		return "command"
	case language == "":
		return "python"
	}
	return language
}

// answerResult records a run's (or a session exec's) result and writes it
// as the answer, its ID the audit row's.
func (s *Server) answerResult(w http.ResponseWriter, r *http.Request, x *execution, res *sandbox.Result, code string) {
	res.ID = x.entry.ID
	x.ran(res, code)
	x.end()
	res.WireForm(wantsExplain(r))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if err := encodeStreaming(w, res, res); err != nil {
		s.log.Debug("writing a result", "request_id", x.info.id, "err", err)
	}
}

// wantsExplain reports whether the caller asked for the per-limit
// enforcement prose in the result (?explain=1).
func wantsExplain(r *http.Request) bool {
	q := r.URL.Query().Get("explain")
	return q == "1" || q == "true"
}

// runCode is what a run's audit row keeps as its code (when it ran and
// audit.store_code is set): the code, or the command as a JSON array.
func runCode(code string, command []string) string {
	if code != "" {
		return code
	}
	b, _ := json.Marshal(command)
	return string(b)
}

// runHash is a run's audit hash: everything that decides what runs — the
// command or the code and its language, the working directory, the
// environment, every file and the stdin.
func runHash(req *v1.RunRequest) string {
	h := audit.NewRequestHash("run")
	cmd, _ := json.Marshal(req.Command)
	h.Field("command", cmd)
	h.Field("code", []byte(req.Code))
	h.Field("language", []byte(req.Language))
	h.Field("dir", []byte(req.Dir))
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		h.Field("env:"+k, []byte(req.Env[k]))
	}
	for _, path := range slices.Sorted(maps.Keys(req.Files)) {
		h.Field("file:"+path, req.Files[path])
	}
	h.Field("stdin", []byte(req.Stdin))
	h.Field("stdin_base64", req.StdinBase64)
	return h.Sum()
}

// streamRun runs with the output teed into events, written as they come.
// The answer's headers wait for the first event, so a run refused before
// any output still gets its problem status. Each event's write has its own
// deadline: a client that stops reading is cut off, while the program is
// never blocked by it (events wait in memory, bounded by the output limit).
// run runs p, whose Stdout and Stderr streamRun sets; at most room bytes
// of each are passed on.
func (s *Server) streamRun(w http.ResponseWriter, r *http.Request, x *execution, room int64, run func(context.Context) (*sandbox.Result, error), p *sandbox.Process, code string) {
	st := &stream{w: w, sse: wantsSSE(r), notify: make(chan struct{}, 1), timeout: s.opts.WriteTimeout}
	// Backends tee only the bytes they keep; the cap holds even if one
	// did not.
	p.Stdout = st.tee(v1.EventStdout, room)
	p.Stderr = st.tee(v1.EventStderr, room)

	type outcome struct {
		res *sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := run(r.Context())
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
		if pr.Status >= 500 {
			s.log.Error("request failed", "request_id", x.info.id, "code", pr.Code, "err", out.err)
		}
		x.end()
		pr.Instance, pr.RequestID = r.URL.Path, x.info.id
		redactProblem(pr)
		st.write(&v1.StreamEvent{Type: v1.EventError, Error: pr}, nil)
		return
	}
	out.res.ID = x.entry.ID
	x.ran(out.res, code)
	x.end()
	out.res.WireForm(wantsExplain(r))
	st.write(&v1.StreamEvent{Type: v1.EventResult, Result: out.res}, out.res)
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
	timeout time.Duration // for writing each event
	started bool
	broken  bool // the client went away or stopped reading; events are dropped

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
		st.write(ev, nil)
	}
}

// flushCarry writes what the chunkers held back at the end.
func (st *stream) flushCarry() {
	for _, c := range st.chunkers {
		if ev := c.Flush(); ev != nil {
			st.write(ev, nil)
		}
	}
}

// write writes one event within the write timeout; res, when the event
// holds it, is the result, whose large fields are written in chunks.
func (st *stream) write(ev *v1.StreamEvent, res *sandbox.Result) {
	if st.broken {
		return
	}
	rc := http.NewResponseController(st.w)
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
	rc.SetWriteDeadline(time.Now().Add(st.timeout))
	var err error
	if st.sse {
		// The JSON holds no newline (encoding/json escapes them), so it
		// is one data line.
		if _, err = fmt.Fprintf(st.w, "event: %s\ndata: ", ev.Type); err == nil {
			err = encodeStreaming(trimNewline{st.w}, ev, res)
		}
		if err == nil {
			_, err = st.w.Write([]byte("\n\n"))
		}
	} else {
		err = encodeStreaming(st.w, ev, res)
	}
	if err != nil {
		st.broken = true
		return
	}
	if err := rc.Flush(); err != nil {
		st.broken = true
	}
}

// trimNewline drops the newline json.Encoder ends a document with: the
// last byte written, when it is one.
type trimNewline struct{ w io.Writer }

func (t trimNewline) Write(p []byte) (int, error) {
	n := len(p)
	if n > 0 && p[n-1] == '\n' {
		p = p[:n-1]
	}
	if _, err := t.w.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}
