package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/execbox/execbox/agent"
	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/sandbox"
)

// A session's interpreter contexts and terminals run in its agent (package
// agent), started the first time one is asked for. While it runs, it is
// the sandbox's one Exec, so the session's execs run through it too; it
// ends with the session.

// ContextInfo describes an interpreter context of a session.
type ContextInfo struct {
	ID       string    `json:"id"`
	Language string    `json:"language"`
	Created  time.Time `json:"created"`
	Calls    int       `json:"calls"`
	// Lost says the context did not survive (its interpreter exited, did
	// not stop at a timeout, or the session's agent ended): reset it.
	Lost string `json:"lost,omitempty"`
}

// TerminalInfo describes a program on a terminal of a session.
type TerminalInfo struct {
	ID      string              `json:"id"`
	Args    []string            `json:"args"`
	Created time.Time           `json:"created"`
	Exit    *agent.TerminalExit `json:"exit,omitempty"`
}

// sessionTerminal is one terminal of a session.
type sessionTerminal struct {
	info TerminalInfo
	t    *agent.Terminal
}

// Bounds of a session's contexts and terminals.
const (
	maxContexts    = 8
	maxTerminals   = 4
	terminalBuffer = sandbox.MiB
	// maxCode is the longest code one call may carry.
	maxCode = sandbox.MiB
)

// running is the session's agent, started when none runs. It holds
// agentMu while it starts, so that one start serves every caller.
func (s *Session) running(ctx context.Context) (*agent.Agent, error) {
	s.agentMu.Lock()
	defer s.agentMu.Unlock()
	if a := s.agent; a != nil {
		err := a.Err()
		if err == nil {
			return a, nil
		}
		s.agentGone(err)
	}
	s.mu.Lock()
	life := time.Until(s.info.Expires)
	s.mu.Unlock()
	a, err := agent.Start(ctx, s.sb, life)
	if err != nil {
		return nil, err
	}
	s.agent = a
	s.e.opts.Logger.Info("session agent started", "session", s.info.ID)
	return a, nil
}

// Start starts the session's agent now rather than with its first
// context or terminal: from then on its execs run side by side (the E2B
// surface's processes do).
func (s *Session) Start(ctx context.Context) error {
	defer s.use()()
	_, err := s.running(ctx)
	return err
}

// agentGone forgets an agent that ended: its contexts are lost, its
// terminals ended. agentMu is held.
func (s *Session) agentGone(why error) {
	s.agent = nil
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.contexts {
		if c.Lost == "" {
			c.Lost = why.Error()
		}
	}
	clear(s.terminals)
}

// liveAgent is the session's agent when one runs, else nil.
func (s *Session) liveAgent() *agent.Agent {
	s.agentMu.Lock()
	defer s.agentMu.Unlock()
	if s.agent != nil && s.agent.Err() != nil {
		s.agentGone(s.agent.Err())
	}
	return s.agent
}

// stopAgent ends the agent (the session is closing).
func (s *Session) stopAgent() {
	s.agentMu.Lock()
	a := s.agent
	s.agent = nil
	s.agentMu.Unlock()
	if a != nil {
		a.Close()
	}
}

func newShortID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// CreateContext starts an interpreter context of language in the session.
func (s *Session) CreateContext(ctx context.Context, language string) (ContextInfo, error) {
	defer s.use()()
	if !slices.Contains(agent.Languages(), language) {
		return ContextInfo{}, errorf(sandbox.ErrInvalid, "language_invalid", "no contexts for language %q (want one of %s)", language, strings.Join(agent.Languages(), ", "))
	}
	s.mu.Lock()
	live := 0
	for _, c := range s.contexts {
		if c.Lost == "" {
			live++
		}
	}
	s.mu.Unlock()
	if live >= maxContexts {
		return ContextInfo{}, errorf(sandbox.ErrBusy, "contexts_exhausted", "the session has %d contexts, the most it may; delete one first", live)
	}
	a, err := s.running(ctx)
	if err != nil {
		return ContextInfo{}, err
	}
	info := &ContextInfo{ID: newShortID("ctx_"), Language: language, Created: time.Now()}
	if err := a.NewContext(ctx, info.ID, language); err != nil {
		return ContextInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contexts[info.ID] = info
	s.gcContexts()
	return *info, nil
}

// gcContexts drops the oldest lost contexts past a bound, so that a
// session that loses many keeps a bounded list. s.mu is held.
func (s *Session) gcContexts() {
	for len(s.contexts) > 4*maxContexts {
		var oldest *ContextInfo
		for _, c := range s.contexts {
			if c.Lost != "" && (oldest == nil || c.Created.Before(oldest.Created)) {
				oldest = c
			}
		}
		if oldest == nil {
			return
		}
		delete(s.contexts, oldest.ID)
	}
}

// Contexts lists the session's contexts, oldest first.
func (s *Session) Contexts() []ContextInfo {
	s.liveAgent() // notices an agent that ended
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ContextInfo, 0, len(s.contexts))
	for _, c := range s.contexts {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b ContextInfo) int { return a.Created.Compare(b.Created) })
	return out
}

// context is the session's context id, which must not be lost.
func (s *Session) context(id string) (*ContextInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.contexts[id]
	switch {
	case !ok:
		return nil, errorf(sandbox.ErrNotFound, "context_not_found", "session %s has no context %s", s.info.ID, id)
	case c.Lost != "":
		return nil, errorf(sandbox.ErrNotFound, "context_lost", "context %s was lost (%s); reset it", id, c.Lost)
	}
	return c, nil
}

// RunCode runs code in context id, within timeout (zero: the session's
// wall limit, which it may not pass), holding a run slot as an Exec does.
// What the code prints is copied live to stdout and stderr (either may be
// nil) and kept within the session's output limit.
func (s *Session) RunCode(ctx context.Context, id, code string, timeout time.Duration, stdout, stderr io.Writer) (*agent.CodeResult, error) {
	defer s.use()()
	l := s.info.Limits
	switch {
	case len(code) > maxCode:
		return nil, errorf(sandbox.ErrInvalid, "code_too_large", "code is %d bytes, more than %d", len(code), maxCode)
	case timeout < 0:
		return nil, errorf(sandbox.ErrInvalid, "timeout_invalid", "timeout must not be negative")
	case timeout > l.Wall:
		return nil, errorf(sandbox.ErrInvalid, "timeout_invalid", "timeout %v is over the session's wall limit %v", timeout, l.Wall)
	case timeout == 0:
		timeout = l.Wall
	}
	a := s.liveAgent() // an agent that ended has lost its contexts
	if _, err := s.context(id); err != nil {
		return nil, err
	}
	if a == nil {
		return nil, errorf(sandbox.ErrNotFound, "context_lost", "context %s was lost with the session's agent; reset it", id)
	}
	release, err := s.e.gate.take(ctx, s.owner, 2*l.Output, s.e.gate.laneOf(s.e.backends[s.info.Backend]))
	if err != nil {
		return nil, err
	}
	defer release()
	call := callOf(ctx)
	start := time.Now()
	res, err := a.RunCode(ctx, id, code, timeout, l.Output, stdout, stderr)
	ev := event.Event{Type: event.Completed, Kind: event.KindContext, Session: s.info.ID, Owner: call.Owner,
		Caller: call.Caller, RequestID: call.RequestID, Backend: s.info.Backend, Isolation: s.info.Isolation.String(),
		Duration: time.Since(start)}
	s.mu.Lock()
	if c := s.contexts[id]; c != nil && err == nil {
		c.Calls++
		if res.Lost {
			c.Lost = res.Error.Message
		}
	}
	s.mu.Unlock()
	switch {
	case err != nil:
		ev.Type, ev.ErrorCode, ev.Error = event.Failed, sandbox.CodeOf(err), err.Error()
	case res.OK:
		ev.Reason = "ok"
	case res.Error != nil:
		ev.Reason = res.Error.Type
	}
	if s.e.events != nil {
		s.e.events.Publish(ev)
	}
	return res, err
}

// ResetContext replaces context id by a fresh one of the same language,
// under the same id: its state is gone.
func (s *Session) ResetContext(ctx context.Context, id string) (ContextInfo, error) {
	defer s.use()()
	s.mu.Lock()
	c, ok := s.contexts[id]
	s.mu.Unlock()
	if !ok {
		return ContextInfo{}, errorf(sandbox.ErrNotFound, "context_not_found", "session %s has no context %s", s.info.ID, id)
	}
	a, err := s.running(ctx)
	if err != nil {
		return ContextInfo{}, err
	}
	a.DropContext(id)
	if err := a.NewContext(ctx, id, c.Language); err != nil {
		return ContextInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh := &ContextInfo{ID: id, Language: c.Language, Created: time.Now()}
	s.contexts[id] = fresh
	return *fresh, nil
}

// DeleteContext ends context id; deleting one that is gone succeeds.
func (s *Session) DeleteContext(id string) error {
	defer s.use()()
	s.mu.Lock()
	_, ok := s.contexts[id]
	delete(s.contexts, id)
	s.mu.Unlock()
	if !ok {
		return errorf(sandbox.ErrNotFound, "context_not_found", "session %s has no context %s", s.info.ID, id)
	}
	if a := s.liveAgent(); a != nil {
		a.DropContext(id)
	}
	return nil
}

// TerminalRequest is a program to start on a new terminal.
type TerminalRequest struct {
	Args       []string
	Env        map[string]string
	Dir        string
	Rows, Cols int
	// OnExit is given the CPU time the program used once it has ended
	// (see agent.TerminalRequest), to charge it where it belongs.
	OnExit func(cpu time.Duration)
}

// OpenTerminal starts req's program on a new terminal (a PTY in the
// sandbox) of the session.
func (s *Session) OpenTerminal(ctx context.Context, req TerminalRequest) (TerminalInfo, error) {
	defer s.use()()
	if req.Rows < 0 || req.Cols < 0 || req.Rows > 10000 || req.Cols > 10000 {
		return TerminalInfo{}, errorf(sandbox.ErrInvalid, "size_invalid", "rows and cols must be within 1…10000")
	}
	if len(req.Args) == 0 {
		req.Args = []string{"/bin/sh"}
	}
	if err := (&sandbox.Process{Args: req.Args, Env: req.Env, Dir: req.Dir}).Validate(); err != nil {
		return TerminalInfo{}, err
	}
	s.mu.Lock()
	live := 0
	for _, t := range s.terminals {
		if t.t.Exit() == nil {
			live++
		}
	}
	s.mu.Unlock()
	if live >= maxTerminals {
		return TerminalInfo{}, errorf(sandbox.ErrBusy, "terminals_exhausted", "the session has %d terminals running, the most it may; end one first", live)
	}
	a, err := s.running(ctx)
	if err != nil {
		return TerminalInfo{}, err
	}
	t, err := a.OpenTerminal(ctx, agent.TerminalRequest{Args: req.Args, Env: req.Env, Dir: req.Dir,
		Rows: cmp.Or(req.Rows, 24), Cols: cmp.Or(req.Cols, 80), Buffer: terminalBuffer, OnExit: req.OnExit})
	if err != nil {
		return TerminalInfo{}, err
	}
	st := &sessionTerminal{info: TerminalInfo{ID: newShortID("term_"), Args: slices.Clone(req.Args), Created: time.Now()}, t: t}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Ended terminals beyond the bound are forgotten, oldest first.
	for len(s.terminals) >= 4*maxTerminals {
		var oldest *sessionTerminal
		for _, x := range s.terminals {
			if x.t.Exit() != nil && (oldest == nil || x.info.Created.Before(oldest.info.Created)) {
				oldest = x
			}
		}
		if oldest == nil {
			break
		}
		delete(s.terminals, oldest.info.ID)
	}
	s.terminals[st.info.ID] = st
	return st.info, nil
}

// Terminal returns terminal id of the session, to read, write, resize
// or kill. Reading it marks the session in use (see Use).
func (s *Session) Terminal(id string) (*agent.Terminal, TerminalInfo, error) {
	s.liveAgent()
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.terminals[id]
	if !ok {
		return nil, TerminalInfo{}, errorf(sandbox.ErrNotFound, "terminal_not_found", "session %s has no terminal %s", s.info.ID, id)
	}
	info := t.info
	info.Exit = t.t.Exit()
	return t.t, info, nil
}

// Terminals lists the session's terminals, oldest first.
func (s *Session) Terminals() []TerminalInfo {
	s.liveAgent()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]TerminalInfo, 0, len(s.terminals))
	for _, t := range s.terminals {
		info := t.info
		info.Exit = t.t.Exit()
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b TerminalInfo) int { return a.Created.Compare(b.Created) })
	return out
}

// Use marks the session in use until the returned func is called (a
// terminal's reader holds it, so that the idle reaper leaves the session
// open while someone watches).
func (s *Session) Use() func() { return s.use() }

// Ending is done when the session starts to close.
func (s *Session) Ending() <-chan struct{} { return s.ending.Done() }
