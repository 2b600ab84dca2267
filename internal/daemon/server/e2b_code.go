package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"

	"github.com/execbox/execbox/agent"
	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/e2b"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/sandbox"
)

// The code interpreter (port 49999) on the session's interpreter
// contexts: /execute runs code in a context (the language's default one
// unless a context is named) and streams what it prints as JSON lines,
// then its value or its error.

// e2bOutputQueue bounds the lines of an execution waiting to be written.
const e2bOutputQueue = 1024

// e2bLanguage is the execbox language of an SDK's language name.
func e2bLanguage(l string) (string, error) {
	switch l {
	case "", "python", "python3":
		return "python", nil
	case "js", "javascript", "node":
		if slices.Contains(agent.Languages(), "javascript") {
			return "javascript", nil
		}
	}
	return "", invalidField("language", "language %q: execbox's code contexts run %v", l, agent.Languages())
}

// e2bContextOf finds the context an execution runs in: the one named, or
// the language's default, made when it has none.
func (s *Server) e2bContextOf(ctx context.Context, sb *e2bSandbox, sess *engine.Session, id, language string) (engine.ContextInfo, error) {
	contexts := sess.Contexts()
	if id != "" {
		for _, c := range contexts {
			if c.ID == id {
				return c, nil
			}
		}
		return engine.ContextInfo{}, sandbox.Errorf(sandbox.ErrNotFound, "context_not_found", "the sandbox has no context %s", id)
	}
	sb.mu.Lock()
	def := sb.contexts[language]
	sb.mu.Unlock()
	for _, c := range contexts {
		if c.ID == def && c.Lost == "" {
			return c, nil
		}
	}
	c, err := sess.CreateContext(ctx, language)
	if err != nil {
		return c, err
	}
	sb.mu.Lock()
	sb.contexts[language] = c.ID
	sb.mu.Unlock()
	return c, nil
}

// e2bExecute is POST /execute. A refusal (the token's limits, the guard,
// a context that cannot be had) is the execution's error line, which the
// SDK shows as the execution's error: an HTTP error's text it does not
// show.
func (s *Server) e2bExecute(w http.ResponseWriter, r *http.Request) {
	c := e2bCallOf(r.Context())
	x := s.begin(r, v1.OpSessionCode)
	defer x.end()
	var refused *v1.Problem
	x.refused = &refused
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	wrote := false
	// answer sends the headers: at once when the code starts, since the
	// SDK gives up on a request whose answer has not begun in time.
	answer := func() {
		if !wrote {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
			c.rc.Flush()
			wrote = true
		}
	}
	write := func(o e2b.Output) {
		answer()
		c.extend(s)
		enc.Encode(o)
		c.rc.Flush()
	}
	refuse := func() {
		write(e2b.Output{Type: e2b.OutputError, Name: refused.Code, Value: e2bMessage(refused.Detail)})
		write(e2b.Output{Type: e2b.OutputEnd})
	}
	fail := func(err error) {
		x.fail(nil, err)
		refuse()
	}
	if !x.admit(nil) {
		refuse()
		return
	}
	sess := c.sess
	x.entry.Session = sess.ID()
	var req e2b.Execute
	if err := s.e2bDecodeLimit(w, r, &req, s.opts.MaxBody); err != nil {
		fail(err)
		return
	}
	x.inFlight()
	if len(req.EnvVars) > 0 {
		fail(invalidField("env_vars", "per-execution environment variables are not in execbox: give envs when the sandbox is created"))
		return
	}
	lang := ""
	if req.ContextID == "" {
		var err error
		if lang, err = e2bLanguage(req.Language); err != nil {
			fail(err)
			return
		}
	}
	info := sess.Info()
	if lang != "" && !x.check(nil, guard.Call{Language: lang, Backend: info.Backend}, nil) {
		refuse()
		return
	}
	cx, err := s.e2bContextOf(r.Context(), c.sb, sess, req.ContextID, lang)
	if err != nil {
		fail(err)
		return
	}
	if lang == "" && !x.check(nil, guard.Call{Language: cx.Language, Backend: info.Backend}, nil) {
		refuse()
		return
	}
	h := audit.NewRequestHash("session_code")
	h.Field("session", []byte(sess.ID()))
	h.Field("context", []byte(cx.ID))
	h.Field("code", []byte(req.Code))
	x.entry.CodeSHA256 = h.Sum()
	x.entry.Limits = &info.Limits

	answer()
	q := newE2BLines()
	type ran struct {
		res *agent.CodeResult
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := sess.RunCode(r.Context(), cx.ID, req.Code, 0,
			e2bLines{q, e2b.OutputStdout}, e2bLines{q, e2b.OutputStderr})
		done <- ran{res, err}
	}()
	var end ran
	for finished := false; !finished; {
		select {
		case o := <-q.ch:
			write(q.took(o))
		case end = <-done:
			finished = true
		}
	}
	for len(q.ch) > 0 {
		write(q.took(<-q.ch))
	}
	if q.lost() {
		write(e2b.Output{Type: e2b.OutputStderr, Text: "[execbox: output dropped: it came faster than it was read]\n"})
	}
	res, err := end.res, end.err
	switch {
	case err != nil:
		p := e2bProblem(err)
		x.entry.ErrorCode = p.Code
		write(e2b.Output{Type: e2b.OutputError, Name: "ExecboxError", Value: p.Detail + " (" + p.Code + ")"})
	case res.Error != nil:
		x.entry.Reason = res.Error.Type
		write(e2b.Output{Type: e2b.OutputError, Name: res.Error.Type, Value: res.Error.Message, Traceback: res.Error.Traceback})
	default:
		x.entry.Reason = "ok"
		if res.Repr != "" {
			o := e2b.Output{Type: e2b.OutputResult, Text: res.Repr, IsMainResult: true}
			var v any
			if json.Unmarshal(res.Value, &v) == nil {
				switch v.(type) {
				case map[string]any, []any:
					o.JSON = v
				}
			}
			write(o)
		}
	}
	if res != nil {
		x.entry.Code = req.Code
		x.cpu = res.CPU
	}
	x.entry.Backend, x.entry.Isolation = info.Backend, info.Isolation.String()
	for _, cc := range sess.Contexts() {
		if cc.ID == cx.ID {
			write(e2b.Output{Type: e2b.OutputCount, ExecutionCount: cc.Calls})
		}
	}
	write(e2b.Output{Type: e2b.OutputEnd})
}

// e2bLines is what a context prints, as lines of the stream.
type e2bLines struct {
	q   *e2bLineQueue
	typ string
}

func (l e2bLines) Write(b []byte) (int, error) {
	l.q.push(e2b.Output{Type: l.typ, Text: string(b)})
	return len(b), nil
}

// e2bLineQueue holds an execution's output lines for the writer, within
// a process follower's bounds (e2bOutputQueue lines, e2bFollowerBytes,
// and the server-wide e2bQueueBytes): past them, output is dropped, and
// said so, rather than hold up the agent's reader.
type e2bLineQueue struct {
	ch      chan e2b.Output
	mu      sync.Mutex
	queued  int64
	dropped bool
}

func newE2BLines() *e2bLineQueue {
	return &e2bLineQueue{ch: make(chan e2b.Output, e2bOutputQueue)}
}

func (q *e2bLineQueue) push(o e2b.Output) {
	n := int64(len(o.Text))
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued+n > e2bFollowerBytes {
		q.dropped = true
		return
	}
	if e2bQueued.Add(n) > e2bQueueBytes {
		e2bQueued.Add(-n)
		q.dropped = true
		return
	}
	select {
	case q.ch <- o:
		q.queued += n
	default:
		e2bQueued.Add(-n)
		q.dropped = true
	}
}

// took counts o, taken from ch, as no longer waiting.
func (q *e2bLineQueue) took(o e2b.Output) e2b.Output {
	n := int64(len(o.Text))
	q.mu.Lock()
	q.queued -= n
	q.mu.Unlock()
	e2bQueued.Add(-n)
	return o
}

func (q *e2bLineQueue) lost() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}

func e2bWireContext(c engine.ContextInfo) e2b.Context {
	return e2b.Context{ID: c.ID, Language: c.Language, Cwd: e2bWorkDir}
}

// e2bContextCall admits a context call and answers its session, or
// answers why not.
func (s *Server) e2bContextCall(w http.ResponseWriter, r *http.Request) (*engine.Session, func(), bool) {
	release, err := admitted(r)
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return nil, release, false
	}
	return e2bCallOf(r.Context()).sess, release, true
}

// e2bContexts is GET /contexts.
func (s *Server) e2bContexts(w http.ResponseWriter, r *http.Request) {
	sess, release, ok := s.e2bContextCall(w, r)
	defer release()
	if !ok {
		return
	}
	out := []e2b.Context{}
	for _, c := range sess.Contexts() {
		out = append(out, e2bWireContext(c))
	}
	writeJSON(w, http.StatusOK, out)
}

// e2bNewContext is POST /contexts: a context of the language, in the
// work dir.
func (s *Server) e2bNewContext(w http.ResponseWriter, r *http.Request) {
	x := s.begin(r, v1.OpSessionCode)
	defer x.end()
	if !x.admit(w) {
		return
	}
	sess := e2bCallOf(r.Context()).sess
	x.entry.Session = sess.ID()
	var req e2b.NewContext
	if err := s.e2bDecode(w, r, &req); err != nil {
		x.fail(w, err)
		return
	}
	lang, err := e2bLanguage(req.Language)
	if err == nil && req.Cwd != "" {
		var p string
		if p, err = e2bPath(req.Cwd); err == nil && p != "" {
			err = invalidField("cwd", "a context runs in the work dir %s", e2bWorkDir)
		}
	}
	if err != nil {
		x.fail(w, err)
		return
	}
	info := sess.Info()
	if !x.check(w, guard.Call{Language: lang, Backend: info.Backend}, nil) {
		return
	}
	c, err := sess.CreateContext(r.Context(), lang)
	if err != nil {
		x.fail(w, err)
		return
	}
	x.entry.Backend, x.entry.Isolation, x.entry.Reason = info.Backend, info.Isolation.String(), "created"
	x.end()
	writeJSON(w, http.StatusOK, e2bWireContext(c))
}

// e2bRestartContext is POST /contexts/{id}/restart: its state is gone.
func (s *Server) e2bRestartContext(w http.ResponseWriter, r *http.Request) {
	sess, release, ok := s.e2bContextCall(w, r)
	defer release()
	if !ok {
		return
	}
	if _, err := sess.ResetContext(r.Context(), r.PathValue("id")); err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// e2bRemoveContext is DELETE /contexts/{id}.
func (s *Server) e2bRemoveContext(w http.ResponseWriter, r *http.Request) {
	sess, release, ok := s.e2bContextCall(w, r)
	defer release()
	if !ok {
		return
	}
	if err := sess.DeleteContext(r.PathValue("id")); err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
