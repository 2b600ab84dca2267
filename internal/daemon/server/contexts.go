package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/execbox/execbox/agent"
	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/internal/daemon/wire"
	"github.com/execbox/execbox/sandbox"
)

// contextRoutes are the routes of a session's interpreter contexts and
// terminals.
func (s *Server) contextRoutes() []route {
	return []route{
		{"POST", "/v1/sessions/{id}/contexts", token, s.handleContextCreate},
		{"GET", "/v1/sessions/{id}/contexts", token, s.handleContextList},
		{"POST", "/v1/sessions/{id}/contexts/{context_id}/run", token, s.handleContextRun},
		{"POST", "/v1/sessions/{id}/contexts/{context_id}/reset", token, s.handleContextReset},
		{"DELETE", "/v1/sessions/{id}/contexts/{context_id}", token, s.handleContextDelete},
		{"POST", "/v1/sessions/{id}/terminals", token, s.handleTerminalOpen},
		{"GET", "/v1/sessions/{id}/terminals", token, s.handleTerminalList},
		{"GET", "/v1/sessions/{id}/terminals/{terminal_id}", token, s.handleTerminalGet},
		{"GET", "/v1/sessions/{id}/terminals/{terminal_id}/output", token, s.handleTerminalOutput},
		{"POST", "/v1/sessions/{id}/terminals/{terminal_id}/input", token, s.handleTerminalInput},
		{"POST", "/v1/sessions/{id}/terminals/{terminal_id}/resize", token, s.handleTerminalResize},
		{"DELETE", "/v1/sessions/{id}/terminals/{terminal_id}", token, s.handleTerminalKill},
	}
}

// handleContextCreate is POST /v1/sessions/{id}/contexts: 201 with the
// new context. Its interpreter starts in the session's agent (the first
// context or terminal starts the agent).
func (s *Server) handleContextCreate(w http.ResponseWriter, r *http.Request) {
	x := s.begin(r, v1.OpSessionCode)
	defer x.end()
	var req v1.ContextRequest
	sess, ok := s.sessionCall(w, r, x, &req)
	if !ok {
		return
	}
	if req.Language == "" {
		req.Language = "python"
	}
	info := sess.Info()
	if !x.check(w, guard.Call{Language: req.Language, Backend: info.Backend}, nil) {
		return
	}
	c, err := sess.CreateContext(r.Context(), req.Language)
	if err != nil {
		x.fail(w, err)
		return
	}
	x.entry.Backend, x.entry.Isolation, x.entry.Reason = info.Backend, info.Isolation.String(), "created"
	x.end()
	w.Header().Set("Location", "/v1/sessions/"+sess.ID()+"/contexts/"+c.ID)
	writeJSON(w, http.StatusCreated, wire.Context(c))
}

// sessionCall admits x, an execution in the caller's session {id}, and
// decodes the body into req; false when it was refused (and answered).
func (s *Server) sessionCall(w http.ResponseWriter, r *http.Request, x *execution, req any) (*engine.Session, bool) {
	if !x.admit(w) {
		return nil, false
	}
	sess, err := s.session(r)
	if err != nil {
		x.fail(w, err)
		return nil, false
	}
	x.entry.Session = sess.ID()
	if err := s.decodeJSON(w, r, req, s.opts.MaxBody); err != nil {
		x.fail(w, err)
		return nil, false
	}
	return sess, true
}

// handleContextList is GET /v1/sessions/{id}/contexts.
func (s *Server) handleContextList(w http.ResponseWriter, r *http.Request) {
	sess, err := s.session(r)
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	out := v1.Contexts{Contexts: []v1.Context{}}
	for _, c := range sess.Contexts() {
		out.Contexts = append(out.Contexts, wire.Context(c))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleContextRun is POST /v1/sessions/{id}/contexts/{context_id}/run: the code
// runs in the context; 200 with how it ended, also when it raised.
func (s *Server) handleContextRun(w http.ResponseWriter, r *http.Request) {
	x := s.begin(r, v1.OpSessionCode)
	defer x.end()
	var req v1.CodeRequest
	sess, ok := s.sessionCall(w, r, x, &req)
	if !ok {
		return
	}
	x.inFlight()
	id := r.PathValue("context_id")
	h := audit.NewRequestHash("session_code")
	h.Field("session", []byte(sess.ID()))
	h.Field("context", []byte(id))
	h.Field("code", []byte(req.Code))
	x.entry.CodeSHA256 = h.Sum()
	info := sess.Info()
	lang := ""
	for _, c := range sess.Contexts() {
		if c.ID == id {
			lang = c.Language
		}
	}
	if !x.check(w, guard.Call{Language: lang, Backend: info.Backend}, nil) {
		return
	}
	x.entry.Limits = &info.Limits
	res, err := sess.RunCode(r.Context(), id, req.Code, time.Duration(req.Timeout), nil, nil)
	if err != nil {
		var ferr error = err
		if sandbox.CodeOf(err) == "timeout_invalid" || sandbox.CodeOf(err) == "code_too_large" {
			ferr = &v1.FieldError{Field: map[string]string{"timeout_invalid": "timeout", "code_too_large": "code"}[sandbox.CodeOf(err)], Err: err}
		}
		x.fail(w, ferr)
		return
	}
	x.entry.Code = req.Code
	x.entry.Backend, x.entry.Isolation = info.Backend, info.Isolation.String()
	x.cpu = res.CPU // charged to the token's budget, as a run's is
	x.entry.Reason = "ok"
	if res.Error != nil {
		x.entry.Reason = res.Error.Type
	}
	x.end()
	out := v1.CodeResult{OK: res.OK, Value: res.Value, Repr: res.Repr, Type: res.Type, Stdout: res.Stdout, Stderr: res.Stderr,
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated, Interrupted: res.Interrupted, Lost: res.Lost,
		DurationMS: float64(res.Duration.Microseconds()) / 1000}
	if res.Error != nil {
		out.Error = &v1.CodeError{Type: res.Error.Type, Message: res.Error.Message, Traceback: res.Error.Traceback}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleContextReset is POST /v1/sessions/{id}/contexts/{context_id}/reset: the
// context starts afresh, under the same id.
func (s *Server) handleContextReset(w http.ResponseWriter, r *http.Request) {
	release, err := admitted(r)
	defer release()
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	sess, err := s.session(r)
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	c, err := sess.ResetContext(r.Context(), r.PathValue("context_id"))
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	writeJSON(w, http.StatusOK, wire.Context(c))
}

// handleContextDelete is DELETE /v1/sessions/{id}/contexts/{context_id}: 204.
func (s *Server) handleContextDelete(w http.ResponseWriter, r *http.Request) {
	sess, err := s.session(r)
	if err == nil {
		err = sess.DeleteContext(r.PathValue("context_id"))
	}
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleTerminalOpen is POST /v1/sessions/{id}/terminals: 201 with the
// terminal, whose program runs on a PTY in the sandbox.
func (s *Server) handleTerminalOpen(w http.ResponseWriter, r *http.Request) {
	x := s.begin(r, v1.OpSessionTerminal)
	defer x.end()
	var req v1.TerminalRequest
	sess, ok := s.sessionCall(w, r, x, &req)
	if !ok {
		return
	}
	h := audit.NewRequestHash("session_terminal")
	h.Field("session", []byte(sess.ID()))
	cmd, _ := json.Marshal(req.Command)
	h.Field("command", cmd)
	h.Field("dir", []byte(req.Dir))
	x.entry.CodeSHA256 = h.Sum()
	info := sess.Info()
	if !x.check(w, guard.Call{Language: "command", Backend: info.Backend}, nil) {
		return
	}
	// The program's CPU time is charged to the guard's budgets when it
	// ends, long after this request: the pass goes with the terminal.
	pass := x.pass
	t, err := sess.OpenTerminal(r.Context(), engine.TerminalRequest{Args: req.Command, Env: req.Env, Dir: req.Dir, Rows: req.Rows, Cols: req.Cols,
		OnExit: func(cpu time.Duration) { pass.Charge(cpu) }})
	if err != nil {
		x.fail(w, err)
		return
	}
	x.pass = nil
	x.entry.Code = string(cmd)
	x.entry.Backend, x.entry.Isolation, x.entry.Reason = info.Backend, info.Isolation.String(), "started"
	x.end()
	w.Header().Set("Location", "/v1/sessions/"+sess.ID()+"/terminals/"+t.ID)
	writeJSON(w, http.StatusCreated, wire.Terminal(t))
}

// handleTerminalList is GET /v1/sessions/{id}/terminals.
func (s *Server) handleTerminalList(w http.ResponseWriter, r *http.Request) {
	sess, err := s.session(r)
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	out := v1.Terminals{Terminals: []v1.Terminal{}}
	for _, t := range sess.Terminals() {
		out.Terminals = append(out.Terminals, wire.Terminal(t))
	}
	writeJSON(w, http.StatusOK, out)
}

// admitted counts a request that makes the sandbox work (a context's
// reset) against the token's rate and in-flight limits, as an execution
// is; the caller calls release (always).
func admitted(r *http.Request) (release func(), err error) {
	if id := infoOf(r.Context()).identity; id != nil {
		rel, err := id.Admit()
		if err != nil {
			return func() {}, err
		}
		return rel, nil
	}
	return func() {}, nil
}

// engineTerminal is a session's terminal and what it was when found.
type engineTerminal struct {
	t    *agent.Terminal
	info engine.TerminalInfo
}

// terminal finds terminal {terminal_id} of the caller's session {id}.
func (s *Server) terminal(r *http.Request) (*engine.Session, *engineTerminal, error) {
	sess, err := s.session(r)
	if err != nil {
		return nil, nil, err
	}
	t, info, err := sess.Terminal(r.PathValue("terminal_id"))
	if err != nil {
		return nil, nil, err
	}
	return sess, &engineTerminal{t, info}, nil
}

// handleTerminalGet is GET /v1/sessions/{id}/terminals/{terminal_id}.
func (s *Server) handleTerminalGet(w http.ResponseWriter, r *http.Request) {
	_, t, err := s.terminal(r)
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	writeJSON(w, http.StatusOK, wire.Terminal(t.info))
}

// handleTerminalOutput is GET /v1/sessions/{id}/terminals/{terminal_id}/output:
// server-sent events — "output" ({data: base64, dropped}) as the terminal
// shows it, then "exit" once the program has ended and its output is read.
// One reader at a time (a second is 429 terminal_read); the output kept while nobody
// reads is bounded (the oldest is dropped, and the next event says how
// much). While it streams, the session is in use.
func (s *Server) handleTerminalOutput(w http.ResponseWriter, r *http.Request) {
	sess, t, err := s.terminal(r)
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	release, ok := t.t.Claim()
	if !ok {
		writeProblem(w, r, v1.NewProblem(sandbox.Errorf(sandbox.ErrBusy, "terminal_read", "another request is reading terminal %s", t.info.ID)))
		return
	}
	defer release()
	defer sess.Use()()
	sse := s.openSSE(w)
	send := func(event string, v any) bool {
		if event == "" {
			return sse(": keep-alive\n\n")
		}
		b, _ := json.Marshal(v)
		return sse("event: %s\ndata: %s\n\n", event, b)
	}
	if !send("", nil) {
		return
	}
	ctx := r.Context()
	for {
		rctx, cancel := context.WithTimeout(ctx, heartbeat)
		data, dropped, exit, err := t.t.Read(rctx)
		cancel()
		switch {
		case exit != nil:
			send(v1.TerminalEventExit, v1.TerminalExit{ExitCode: exit.ExitCode, Signal: exit.Signal, Error: exit.Error})
			return
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			select {
			case <-s.drain:
				return
			case <-sess.Ending():
				return
			default:
			}
			if !send("", nil) {
				return
			}
		default:
			if !send(v1.TerminalEventOutput, v1.TerminalOutput{Data: data, Dropped: dropped}) {
				return
			}
		}
	}
}

// handleTerminalInput is POST /v1/sessions/{id}/terminals/{terminal_id}/input:
// the raw body (at most v1.MaxTerminalInput bytes, read within the body
// timeout) is typed into the terminal; 204. Typing is running code: the
// input is an execution of the terminal's operation (session_terminal,
// language command) that the guard decides and the token's budgets count,
// refused with the codes of any refused execution; its audit row names
// the session, the terminal and the input's size and SHA-256, never the
// input.
func (s *Server) handleTerminalInput(w http.ResponseWriter, r *http.Request) {
	x := s.begin(r, v1.OpSessionTerminal)
	defer x.end()
	if !x.admit(w) {
		return
	}
	sess, t, err := s.terminal(r)
	if err != nil {
		x.fail(w, err)
		return
	}
	x.entry.Session, x.entry.Terminal = sess.ID(), t.info.ID
	defer sess.Use()()
	data, err := s.terminalInput(w, r)
	if err != nil {
		x.fail(w, err)
		return
	}
	x.inFlight()
	h := audit.NewRequestHash("session_terminal_input")
	h.Field("session", []byte(sess.ID()))
	h.Field("terminal", []byte(t.info.ID))
	h.Field("input", data)
	x.entry.CodeSHA256 = h.Sum()
	x.entry.Inputs = []audit.Input{{Size: int64(len(data)), SHA256: audit.Hash(string(data))}}
	if t.info.Exit != nil {
		x.fail(w, sandbox.Errorf(sandbox.ErrInvalid, "terminal_ended", "terminal %s has ended", t.info.ID))
		return
	}
	info := sess.Info()
	// Continued: the terminal's open was the call an operator confirmed
	// and a budget counted; each input is held to the same rules and the
	// budgets' state, not confirmed or counted again.
	if !x.check(w, guard.Call{Language: "command", Backend: info.Backend, Continued: true}, nil) {
		return
	}
	if err := t.t.Write(r.Context(), data); err != nil {
		x.fail(w, err)
		return
	}
	x.entry.Backend, x.entry.Isolation, x.entry.Reason = info.Backend, info.Isolation.String(), "input"
	x.end()
	w.WriteHeader(http.StatusNoContent)
}

// terminalInput reads a terminal input's body: at most
// v1.MaxTerminalInput bytes (413 input_too_large), within the body
// timeout (408 body_timeout).
func (s *Server) terminalInput(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, v1.MaxTerminalInput))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, sandbox.Errorf(sandbox.ErrLimit, "input_too_large", "terminal input is at most %d bytes a request", v1.MaxTerminalInput)
		}
		return nil, s.readError(w, err)
	}
	rc.SetReadDeadline(time.Time{})
	return data, nil
}

// handleTerminalResize is POST /v1/sessions/{id}/terminals/{terminal_id}/resize.
func (s *Server) handleTerminalResize(w http.ResponseWriter, r *http.Request) {
	_, t, err := s.terminal(r)
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	var req v1.TerminalResize
	if err := s.decodeJSON(w, r, &req, s.opts.MaxBody); err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	if err := t.t.Resize(r.Context(), req.Rows, req.Cols); err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleTerminalKill is DELETE /v1/sessions/{id}/terminals/{terminal_id}: its
// program and everything it started are killed; 204.
func (s *Server) handleTerminalKill(w http.ResponseWriter, r *http.Request) {
	_, t, err := s.terminal(r)
	if err == nil && t.info.Exit == nil {
		err = t.t.Kill(r.Context())
	}
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
