package engine

import (
	"cmp"
	"context"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/execbox/execbox/agent"
	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/sandbox"
)

// SessionOptions bound sessions: long-lived sandboxes that run several
// Execs and keep their files in between.
type SessionOptions struct {
	// Max is the most sessions open at once, all owners together
	// (default 64; -1 turns sessions off).
	Max int
	// PerOwner is the most sessions one unprivileged owner holds open
	// (default 8).
	PerOwner int
	// TTL is a session's hard lifetime when its request names none
	// (default 30 min); MaxTTL the longest a request may ask for (default
	// 24 h).
	TTL, MaxTTL time.Duration
	// Idle is how long a session may go without an operation before it
	// is closed, when its request names none (default 10 min); MaxIdle the
	// longest a request may ask for (default MaxTTL).
	Idle, MaxIdle time.Duration
	// ReapInterval is how often expired and idle sessions are looked for
	// (default 5 s).
	ReapInterval time.Duration
	// FileMemory bounds what the open sessions' files may hold together
	// in this host's memory: each session holds its work_size + tmp_size
	// (memory-backed, kept as long as it lives) from before its sandbox
	// is made until it is closed, and one unprivileged owner's sessions
	// at most half of it (always room for one session at the maxima). A
	// session that does not fit is refused with ErrBusy
	// "sessions_exhausted"; one on a Remote backend holds none. 0 means
	// sandbox.HostSessionMemory(). See the package doc for why.
	FileMemory int64
	// Replica is this execbox's name among the replicas of one deployment:
	// session ids begin with it and a dot (package internal/daemon/replica), so
	// any replica can tell which one holds a session. "" = alone.
	Replica string
}

// ObserveSessions adds f to the observers of session events:
// SessionCreated, SessionClosed, SessionExpired and SessionIdle. f runs on
// the goroutine that caused the event (a request, the reaper, Close); it
// must not block.
func (e *Engine) ObserveSessions(f func(event string, s SessionInfo)) {
	e.sessions.mu.Lock()
	defer e.sessions.mu.Unlock()
	e.sessions.observers = append(e.sessions.observers, f)
}

// notify tells the observers of an event, and publishes it on bus.
func (ss *sessions) notify(what string, info SessionInfo) {
	ss.mu.Lock()
	obs, bus := ss.observers, ss.bus
	ss.mu.Unlock()
	for _, f := range obs {
		f(what, info)
	}
	if bus != nil {
		ev := event.Event{Type: "session." + what, Kind: event.KindSession, Owner: info.Owner, Session: info.ID,
			Backend: info.Backend, Isolation: info.Isolation.String(), Reason: info.Closed}
		if what != SessionCreated {
			ev.Duration = time.Since(info.Created)
		}
		bus.Publish(ev)
	}
}

// Session events, as observers get them; a closed session's
// SessionInfo.Closed says why.
const (
	SessionCreated = "created"
	SessionClosed  = "closed" // by its owner, or at shutdown
	SessionExpired = "expired"
	SessionIdle    = "idle"
)

// Why a session was closed (SessionInfo.Closed).
const (
	ClosedByOwner  = "closed"
	ClosedExpired  = "expired"
	ClosedIdle     = "idle"
	ClosedShutdown = "shutdown"
)

// SessionRequest is what a new session is made of.
type SessionRequest struct {
	// Selection says where it may run, as for a run.
	Selection sandbox.Selection
	// Spec is the sandbox's spec: its memory, pids and disk limits hold
	// for the whole session, its wall and output limits for each Exec.
	// Spec.Files are written into the work dir first.
	Spec sandbox.Spec
	// TTL and Idle override the configured ones, within their maxima.
	TTL, Idle time.Duration
	// Labels are the caller's, kept and listed (at most 16, short).
	Labels map[string]string
}

// SessionInfo describes a session at one moment.
type SessionInfo struct {
	ID        string            `json:"id"`
	Owner     string            `json:"owner,omitempty"`
	Backend   string            `json:"backend"`
	Isolation sandbox.Isolation `json:"isolation"`
	Labels    map[string]string `json:"labels,omitempty"`
	Limits    sandbox.Limits    `json:"limits"`
	Created   time.Time         `json:"created"`
	Expires   time.Time         `json:"expires"`
	LastUsed  time.Time         `json:"last_used"`
	// IdleTimeout is how long the session may stay unused.
	IdleTimeout time.Duration `json:"idle_timeout"`
	Execs       int           `json:"execs"`
	// Closed is why the session was closed ("" while it is open).
	Closed string `json:"closed,omitempty"`
}

// Session is one open session. Its methods are safe for concurrent use;
// Execs run one at a time (a second is ErrBusy "sandbox_busy"), file
// operations alongside.
type Session struct {
	e     *Engine
	sb    sandbox.Sandbox
	owner Owner
	// ending is cancelled when the session starts to close: its file
	// operations end then, so that a stalled upload cannot hold Close.
	ending context.Context
	end    context.CancelFunc

	mu        sync.Mutex
	info      SessionInfo
	active    int // operations running: the idle reaper leaves a busy session alone
	contexts  map[string]*ContextInfo
	terminals map[string]*sessionTerminal

	// unhold gives back the memory the session's files hold (FileMemory).
	unhold func()

	// agentMu guards agent, the session's agent while one runs (see
	// agent.go); it is taken before mu.
	agentMu sync.Mutex
	agent   *agent.Agent
}

// Bounds of a session's labels.
const (
	maxLabels   = 16
	maxLabelLen = 256
)

// sessions is the engine's set of open sessions, and the most recently
// closed ones (so that a second close succeeds and a late caller learns
// why its session is gone).
type sessions struct {
	files     budget // what the open sessions' files hold (FileMemory)
	mu        sync.Mutex
	open      map[string]*Session
	pending   map[*Session]bool // being created: they count against the bounds
	closed    map[string]SessionInfo
	observers []func(string, SessionInfo)
	bus       *event.Bus // the engine's: session events are published there too
	order     []string   // closed ids, oldest first, at most maxClosed
}

const maxClosed = 1024

func (o SessionOptions) withDefaults() SessionOptions {
	if o.Max == 0 {
		o.Max = 64
	}
	if o.PerOwner == 0 {
		o.PerOwner = 8
	}
	// A default is kept within a configured maximum; a maximum left out
	// is at least its default.
	if o.TTL == 0 {
		o.TTL = 30 * time.Minute
		if o.MaxTTL > 0 {
			o.TTL = min(o.TTL, o.MaxTTL)
		}
	}
	if o.MaxTTL == 0 {
		o.MaxTTL = max(24*time.Hour, o.TTL)
	}
	if o.Idle == 0 {
		o.Idle = 10 * time.Minute
		if o.MaxIdle > 0 {
			o.Idle = min(o.Idle, o.MaxIdle)
		}
	}
	if o.MaxIdle == 0 {
		o.MaxIdle = max(o.MaxTTL, o.Idle)
	}
	if o.ReapInterval == 0 {
		o.ReapInterval = 5 * time.Second
	}
	if o.FileMemory == 0 {
		o.FileMemory = sandbox.HostSessionMemory()
	}
	return o
}

func (o SessionOptions) validate() error {
	switch {
	case o.Max < -1 || o.PerOwner < 0 || o.TTL < 0 || o.Idle < 0 || o.ReapInterval < 0 || o.FileMemory < 0:
		return errorf(sandbox.ErrInvalid, "config_invalid", "sessions: sizes and durations must not be negative")
	case o.TTL > o.MaxTTL:
		return errorf(sandbox.ErrInvalid, "config_invalid", "sessions: ttl %s is over max_ttl %s", o.TTL, o.MaxTTL)
	case o.Idle > o.MaxIdle:
		return errorf(sandbox.ErrInvalid, "config_invalid", "sessions: idle_timeout %s is over max_idle_timeout %s", o.Idle, o.MaxIdle)
	case strings.Contains(o.Replica, "."):
		return errorf(sandbox.ErrInvalid, "config_invalid", "sessions: replica %q: a dot ends the replica's part of a session id", o.Replica)
	}
	return nil
}

// OpenSession creates a session for owner: a sandbox selected as for a
// run, under the configured policy and limits, that lives until it is
// closed, expires (TTL) or stays unused for its idle timeout. It is
// refused with ErrBusy "sessions_exhausted" when Max sessions are open,
// the owner holds PerOwner, or its files do not fit in FileMemory (or in
// the owner's half of it), and with ErrUnavailable "sessions_unsupported"
// on a backend without sessions. A session takes no run slot; each Exec in
// it does.
func (e *Engine) OpenSession(ctx context.Context, owner Owner, req SessionRequest) (*Session, error) {
	o := e.opts.Sessions
	select {
	case <-e.stop:
		return nil, errorf(sandbox.ErrUnavailable, "engine_closed", "execbox is shutting down")
	default:
	}
	if o.Max < 0 {
		return nil, errorf(sandbox.ErrUnavailable, "sessions_disabled", "sessions are turned off here (sessions.max = -1)")
	}
	ttl, idle := cmp.Or(req.TTL, o.TTL), cmp.Or(req.Idle, o.Idle)
	switch {
	case req.TTL < 0 || req.Idle < 0:
		return nil, errorf(sandbox.ErrInvalid, "session_invalid", "ttl and idle_timeout must not be negative")
	case ttl > o.MaxTTL:
		return nil, errorf(sandbox.ErrInvalid, "session_invalid", "ttl %s is over the maximum %s (sessions.max_ttl)", ttl, o.MaxTTL)
	case idle > o.MaxIdle:
		return nil, errorf(sandbox.ErrInvalid, "session_invalid", "idle_timeout %s is over the maximum %s (sessions.max_idle_timeout)", idle, o.MaxIdle)
	case len(req.Labels) > maxLabels:
		return nil, errorf(sandbox.ErrInvalid, "session_invalid", "more than %d labels", maxLabels)
	}
	for k, v := range req.Labels {
		if k == "" || len(k) > maxLabelLen || len(v) > maxLabelLen {
			return nil, errorf(sandbox.ErrInvalid, "session_invalid", "label %.40q: keys must be 1 to %d bytes, values at most %d", k, maxLabelLen, maxLabelLen)
		}
	}
	spec, _, err := e.checkSpec(req.Spec)
	if err != nil {
		return nil, err
	}
	b, _, err := e.Select(ctx, req.Selection)
	if err == nil {
		err = e.fits(b, spec)
	}
	if err != nil {
		return nil, err
	}
	caps := b.Capabilities()
	if !caps.Sessions {
		return nil, errorf(sandbox.ErrUnavailable, "sessions_unsupported", "backend %s does not keep a sandbox across execs", b.Name())
	}
	// The place is taken before the sandbox is made, so that a burst of
	// creates cannot overshoot the bounds.
	s := &Session{e: e, owner: owner, contexts: map[string]*ContextInfo{}, terminals: map[string]*sessionTerminal{}, unhold: func() {}}
	s.ending, s.end = context.WithCancel(context.Background())
	if err := e.sessions.reserve(s, owner, o); err != nil {
		s.end()
		return nil, err
	}
	if !caps.Remote {
		// Every way its files are written (Spec.Files, WriteFiles, Files,
		// its programs) fills what its limits size: held whole, up front.
		share := max(o.FileMemory/2, e.opts.Max.WorkSize+e.opts.Max.TmpSize)
		if s.unhold, err = e.sessions.files.hold(owner, spec.Limits.WorkSize+spec.Limits.TmpSize, o.FileMemory, share); err != nil {
			s.end()
			e.sessions.unreserve(s)
			return nil, err
		}
	}
	sb, err := b.Create(ctx, spec)
	if err == nil && len(spec.Files) > 0 {
		if err = sb.WriteFiles(ctx, spec.Files); err != nil {
			closeQuietly(sb)
		}
	}
	if err != nil {
		s.end()
		s.unhold()
		e.sessions.unreserve(s)
		return nil, err
	}
	now := time.Now()
	s.sb = sb
	s.info = SessionInfo{
		ID: sessionID(o.Replica, sb.ID()), Owner: owner.Name, Backend: b.Name(), Isolation: caps.Isolation,
		Labels: maps.Clone(req.Labels), Limits: spec.Limits,
		Created: now, Expires: now.Add(ttl), LastUsed: now, IdleTimeout: idle,
	}
	e.sessions.add(s)
	select {
	case <-e.stop:
		// The engine closed while the sandbox was made: closeSessions
		// may have run already.
		s.close(context.WithoutCancel(ctx), ClosedShutdown)
		return nil, errorf(sandbox.ErrUnavailable, "engine_closed", "execbox is shutting down")
	default:
	}
	e.opts.Logger.Info("session created", "session", s.info.ID, "owner", owner.Name, "backend", b.Name(), "ttl", ttl, "idle_timeout", idle)
	e.sessions.notify(SessionCreated, s.Info())
	return s, nil
}

// sessionID is the id of a session of sandbox id in replica ("" = alone);
// internal/daemon/replica.Of reads the replica back.
func sessionID(replica, id string) string {
	if replica == "" {
		return id
	}
	return replica + "." + id
}

func closeQuietly(sb sandbox.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb.Close(ctx)
}

// reserve counts s, a session in the making, against the bounds.
func (ss *sessions) reserve(s *Session, owner Owner, o SessionOptions) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.open == nil {
		ss.open, ss.pending, ss.closed = map[string]*Session{}, map[*Session]bool{}, map[string]SessionInfo{}
	}
	if len(ss.open)+len(ss.pending) >= o.Max {
		return errorf(sandbox.ErrBusy, "sessions_exhausted", "%d sessions are open, the most this server holds (sessions.max); close one first", o.Max)
	}
	if !owner.Privileged {
		n := 0
		for _, x := range ss.open {
			if x.owner.Name == owner.Name {
				n++
			}
		}
		for x := range ss.pending {
			if x.owner.Name == owner.Name {
				n++
			}
		}
		if n >= o.PerOwner {
			return errorf(sandbox.ErrBusy, "sessions_exhausted", "you hold %d open sessions, the most one token may (sessions.per_owner); close one first", n)
		}
	}
	ss.pending[s] = true
	return nil
}

func (ss *sessions) unreserve(s *Session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.pending, s)
}

// add turns s's reservation into its entry under its id.
func (ss *sessions) add(s *Session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.pending, s)
	ss.open[s.info.ID] = s
}

// OpenSessions is how many sessions are open now.
func (e *Engine) OpenSessions() int {
	e.sessions.mu.Lock()
	defer e.sessions.mu.Unlock()
	return len(e.sessions.open)
}

// Session returns owner's open session id. Another owner's session is
// ErrNotFound as if it did not exist, except for a privileged owner; a
// recently closed one is ErrNotFound "session_closed" saying why.
func (e *Engine) Session(owner Owner, id string) (*Session, error) {
	ss := &e.sessions
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s, ok := ss.open[id]; ok && s.visibleTo(owner) {
		return s, nil
	}
	if info, ok := ss.closed[id]; ok && (owner.Privileged || info.Owner == owner.Name) {
		return nil, errorf(sandbox.ErrNotFound, "session_closed", "session %s is closed (%s)", id, info.Closed)
	}
	return nil, errorf(sandbox.ErrNotFound, "session_not_found", "no session %s", id)
}

func (s *Session) visibleTo(o Owner) bool { return o.Privileged || s.owner.Name == o.Name }

// Sessions lists the open sessions owner may see (all, for a privileged
// owner), oldest first.
func (e *Engine) Sessions(owner Owner) []SessionInfo {
	ss := &e.sessions
	ss.mu.Lock()
	var list []*Session
	for _, s := range ss.open {
		if s.visibleTo(owner) {
			list = append(list, s)
		}
	}
	ss.mu.Unlock()
	out := make([]SessionInfo, 0, len(list))
	for _, s := range list {
		out = append(out, s.Info())
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID)) })
	return out
}

// CloseSession closes owner's session id: every process of it ends and
// every trace of it goes. Closing one that is already closed succeeds.
func (e *Engine) CloseSession(ctx context.Context, owner Owner, id string) error {
	s, err := e.Session(owner, id)
	if err != nil {
		if sandbox.CodeOf(err) == "session_closed" {
			return nil
		}
		return err
	}
	return s.close(ctx, ClosedByOwner)
}

// close removes s from the open set (once), leaving why in its place for
// whoever asks after it, and closes its sandbox.
func (s *Session) close(ctx context.Context, why string) error {
	ss := &s.e.sessions
	ss.mu.Lock()
	if cur, ok := ss.open[s.ID()]; !ok || cur != s {
		ss.mu.Unlock()
		return nil // closed by someone else
	}
	delete(ss.open, s.ID())
	s.mu.Lock() // after ss.mu, as reap takes them
	s.info.Closed = why
	info := s.info
	s.mu.Unlock()
	ss.closed[info.ID] = info
	ss.order = append(ss.order, info.ID)
	if len(ss.order) > maxClosed {
		delete(ss.closed, ss.order[0])
		ss.order = slices.Delete(ss.order, 0, 1)
	}
	ss.mu.Unlock()

	s.end()
	s.stopAgent()
	err := s.sb.Close(ctx)
	// Its files went with its sandbox; were Close to fail, the session is
	// gone all the same and no one writes into it through the engine.
	s.unhold()
	info = s.Info()

	event := SessionClosed
	switch why {
	case ClosedExpired:
		event = SessionExpired
	case ClosedIdle:
		event = SessionIdle
	}
	log := s.e.opts.Logger.Info
	if err != nil {
		log = s.e.opts.Logger.Warn
	}
	log("session closed", "session", info.ID, "owner", info.Owner, "reason", why, "execs", info.Execs, "err", err)
	ss.notify(event, info)
	return err
}

// reap closes the sessions past their TTL, and the idle ones no operation
// holds, as of now.
func (e *Engine) reap(now time.Time) {
	ss := &e.sessions
	ss.mu.Lock()
	type due struct {
		s   *Session
		why string
	}
	var list []due
	for _, s := range ss.open {
		s.mu.Lock()
		switch {
		case !now.Before(s.info.Expires):
			list = append(list, due{s, ClosedExpired})
		case s.active == 0 && now.Sub(s.info.LastUsed) >= s.info.IdleTimeout:
			list = append(list, due{s, ClosedIdle})
		}
		s.mu.Unlock()
	}
	ss.mu.Unlock()
	// At once: one slow to close does not hold the others open.
	var wg sync.WaitGroup
	for _, d := range list {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := d.s.close(ctx, d.why); err != nil {
				e.opts.Logger.Warn("closing a session", "session", d.s.info.ID, "err", err)
			}
		})
	}
	wg.Wait()
}

// reaper runs reap every ReapInterval until the engine stops.
func (e *Engine) reaper() {
	t := time.NewTicker(e.opts.Sessions.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			e.reap(now)
		}
	}
}

// closeSessions closes every open session (shutdown), at once.
func (e *Engine) closeSessions() {
	ss := &e.sessions
	ss.mu.Lock()
	var list []*Session
	for _, s := range ss.open {
		list = append(list, s)
	}
	ss.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range list {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := s.close(ctx, ClosedShutdown); err != nil {
				e.opts.Logger.Warn("closing a session at shutdown", "session", s.info.ID, "err", err)
			}
		})
	}
	wg.Wait()
}

// Info describes the session now.
func (s *Session) Info() SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := s.info
	info.Labels = maps.Clone(info.Labels)
	return info
}

// ID is the session's id.
func (s *Session) ID() string { return s.info.ID }

// use marks an operation running (the reaper leaves the session open)
// and returns its end, which marks the session used now.
func (s *Session) use() func() {
	s.mu.Lock()
	s.active++
	s.info.LastUsed = time.Now()
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.active--
		s.info.LastUsed = time.Now()
		s.mu.Unlock()
	}
}

// Exec runs p in the session, holding a run slot (within owner's share)
// and the result memory of the session's limits while it runs. p.Timeout
// may shorten the session's wall limit for this Exec, never lengthen it.
func (s *Session) Exec(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	defer s.use()()
	release, err := s.e.gate.take(ctx, s.owner, s.info.Limits.ResultBytes(), s.e.gate.laneOf(s.e.backends[s.info.Backend]))
	if err != nil {
		return nil, err
	}
	defer release()
	base := event.Event{Kind: event.KindSessionExec, Session: s.info.ID}
	res, err := s.e.execute(ctx, base, func(ctx context.Context, a *attempt) (*sandbox.Result, error) {
		a.backend, a.iso, a.started = s.info.Backend, s.info.Isolation, true
		if ag := s.liveAgent(); ag != nil {
			// The agent is the sandbox's one Exec: this one runs in it.
			res, err := ag.Exec(ctx, p, s.info.Limits)
			if res != nil {
				res.ID, res.Backend, res.Isolation = s.info.ID, s.info.Backend, s.info.Isolation
			}
			return res, err
		}
		return s.sb.Exec(ctx, p)
	})
	if err == nil {
		s.mu.Lock()
		s.info.Execs++
		s.mu.Unlock()
	}
	return res, err
}

// WriteFiles writes small files (relative path → content) into the work
// dir, as a run's input files.
func (s *Session) WriteFiles(ctx context.Context, files map[string][]byte) error {
	defer s.use()()
	return s.sb.WriteFiles(ctx, files)
}

// Files returns the session's file operations (sandbox.Files), each of
// which marks the session used; a backend whose sandboxes do not offer
// them is ErrUnavailable "files_unsupported".
func (s *Session) Files() (sandbox.Files, error) {
	f, ok := s.sb.(sandbox.Files)
	if !ok {
		return nil, errorf(sandbox.ErrUnavailable, "files_unsupported", "backend %s offers no file operations in a session", s.info.Backend)
	}
	return usedFiles{f, s}, nil
}

// usedFiles is a session's sandbox.Files that marks the session used and
// ends each operation when the session starts to close.
type usedFiles struct {
	f sandbox.Files
	s *Session
}

// begin marks the session used and binds ctx to its life.
func (u usedFiles) begin(ctx context.Context) (context.Context, func()) {
	done := u.s.use()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(u.s.ending, cancel)
	return ctx, func() {
		stop()
		cancel()
		done()
	}
}

func (u usedFiles) PutFile(ctx context.Context, path string, r io.Reader, max int64) (int64, error) {
	ctx, end := u.begin(ctx)
	defer end()
	return u.f.PutFile(ctx, path, r, max)
}

func (u usedFiles) GetFile(ctx context.Context, path string, w io.Writer, max int64) (int64, error) {
	ctx, end := u.begin(ctx)
	defer end()
	return u.f.GetFile(ctx, path, w, max)
}

func (u usedFiles) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	ctx, end := u.begin(ctx)
	defer end()
	return u.f.Stat(ctx, path)
}

func (u usedFiles) List(ctx context.Context, dir string, max int) ([]sandbox.FileInfo, bool, error) {
	ctx, end := u.begin(ctx)
	defer end()
	return u.f.List(ctx, dir, max)
}

func (u usedFiles) Remove(ctx context.Context, path string) error {
	ctx, end := u.begin(ctx)
	defer end()
	return u.f.Remove(ctx, path)
}

func (u usedFiles) Mkdir(ctx context.Context, path string) error {
	ctx, end := u.begin(ctx)
	defer end()
	return u.f.Mkdir(ctx, path)
}

// SessionMaxima are the longest lifetime and idle timeout a session's
// request may ask for.
func (e *Engine) SessionMaxima() (ttl, idle time.Duration) {
	return e.opts.Sessions.MaxTTL, e.opts.Sessions.MaxIdle
}
