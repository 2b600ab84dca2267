package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/internal/daemon/metrics"
	"github.com/execbox/execbox/internal/daemon/replica"
	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/tool"
)

// Options configure a Server.
type Options struct {
	// Engine runs commands, function calls and lints; it owns the
	// configured policy and the run gate (engine.Options.MaxRuns); required.
	Engine *engine.Engine
	// MCP, when set, makes the handler served at POST /mcp from the API's
	// own handler (mcpserver: its tool calls come back in-process); nil
	// answers /mcp 404.
	MCP func(api http.Handler) http.Handler
	// Functions runs function calls and lints (function.New over
	// Engine.Call, as configured); nil means one with function.Options'
	// defaults but FunctionTimeout.
	Functions *function.Executor
	// Auth checks bearer tokens; nil means no tokens (everyone anonymous).
	Auth *auth.Authenticator
	// Guard decides every execution before it starts (rules, budgets,
	// confirmations); nil admits everything.
	Guard *guard.Guard
	// Tools are the tools GET /v1/tools lists and POST
	// /v1/tools/{name}:run runs; nil means none.
	Tools *tool.Set
	// Audit records every execution; nil means no audit log.
	Audit *audit.Store
	// Metrics; nil makes new ones.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// MaxBody bounds a run request's body (default 1 MiB).
	MaxBody int64
	// BodyTimeout bounds reading a request body (default 30 s); slower is
	// answered 408. A body the server does not read (a request refused
	// before it, such as a 401) is waited for at most a second.
	BodyTimeout time.Duration
	// MinBodyRate is the slowest a body may come, in bytes per second
	// (default 4 KiB): every MinBodyRate × BodyTimeout bytes of it within
	// BodyTimeout of the server's waiting (pace.go). An upload's body
	// slower than that is cut (408 body_timeout); any body behind that
	// pace no longer shields its connection from eviction.
	MinBodyRate int64
	// MaxUploads bounds the uploads (PUT …/files/{path}, POST …/upload)
	// streaming in at once (default 64), MaxUploadsPerToken those of one
	// non-admin token (0: half of MaxUploads), and AdminUploads of them
	// are kept for admin tokens (at most MaxUploads − 1); past a bound an
	// upload is answered 429 too_many_uploads.
	MaxUploads, MaxUploadsPerToken, AdminUploads int
	// WriteTimeout bounds writing one answer, from its first byte, and
	// each event of a stream (default 60 s): a client that does not read
	// is cut off, and the run slot its result held is freed.
	WriteTimeout time.Duration
	// HeaderTimeout bounds reading a request's header (default 10 s), and
	// IdleTimeout how long a kept-alive connection waits for the next
	// request (default 60 s).
	HeaderTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header (default 16 KiB); more is
	// answered 431.
	MaxHeaderBytes int
	// MaxConnections bounds the connections open at once (default
	// DefaultMaxConnections()), MaxConnectionsPerAddress those from one
	// remote address (default a quarter of it, at least 8). At a bound
	// the oldest connection not serving an authenticated request is
	// closed for the new one.
	MaxConnections, MaxConnectionsPerAddress int
	// AllowedHosts are host names a request's Host may name besides IP
	// addresses and localhost ("*": any); others are refused (DNS
	// rebinding).
	AllowedHosts []string
	// AllowedOrigins are the web origins ("https://app.example.com") whose
	// pages may call the API from a browser; other cross-origin requests
	// are refused, and CORS preflights are answered only for these.
	AllowedOrigins []string
	// PublicMetrics serves /metrics without a token.
	PublicMetrics bool
	// EventBuffer is how many events one GET /v1/events stream may hold
	// unsent before it loses them (default 256); MaxEventStreams how many
	// such streams are open at once (default 64), MaxEventStreamsPerToken
	// how many of one non-admin token (0: half of MaxEventStreams), and
	// AdminEventStreams of them are kept for admin tokens (at most
	// MaxEventStreams − 1).
	EventBuffer, MaxEventStreams               int
	MaxEventStreamsPerToken, AdminEventStreams int
	// Playground serves the web playground (package webui) at "/": GET
	// and HEAD of any path that is not the API's.
	Playground bool
	// FunctionTimeout is the executor's default timeout, for the audit
	// log's limits (default 15 s).
	FunctionTimeout time.Duration
	// DrainDelay and ShutdownTimeout shape a graceful shutdown (see Serve);
	// ShutdownTimeout defaults to 30 s.
	DrainDelay      time.Duration
	ShutdownTimeout time.Duration
	// Replica is this server's name among the replicas of a deployment
	// (the engine's SessionOptions.Replica must be the same), and Peers
	// finds the others: a request about a session whose id names another
	// replica is passed to it once authenticated (package replica). nil
	// Peers: every session is looked for here.
	Replica string
	Peers   replica.Finder
}

// Server is the HTTP API.
type Server struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics.Metrics
	auth    *auth.Authenticator
	handler http.Handler
	routes  []route
	mcp     http.Handler // POST /mcp

	hosts   []string // AllowedHosts, normalised
	origins []string // AllowedOrigins, normalised
	conns   atomic.Pointer[connLimiter]

	draining atomic.Bool
	drain    chan struct{}  // closed when the drain starts: event streams end
	closing  atomic.Bool    // the drain delay is over: new executions are refused
	handlers sync.WaitGroup // requests being handled

	uploads      *shares // uploads streaming in
	eventStreams *shares // GET /v1/events answers open

	peerTransport *http.Transport // requests passed to other replicas

	e2b *e2bSandboxes // the E2B API's sandboxes
}

// New checks o and returns a Server.
func New(o Options) (*Server, error) {
	if o.Engine == nil {
		return nil, errors.New("server: an engine is required")
	}
	if o.MaxBody <= 0 {
		o.MaxBody = sandbox.MiB
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = 30 * time.Second
	}
	if o.MinBodyRate <= 0 {
		o.MinBodyRate = 4 * sandbox.KiB
	}
	if o.MaxUploads <= 0 {
		o.MaxUploads = 64
	}
	if o.FunctionTimeout <= 0 {
		o.FunctionTimeout = function.DefaultTimeout
	}
	if o.Functions == nil {
		fx, err := function.New(function.EngineFunc(o.Engine.Call), function.Options{DefaultTimeout: o.FunctionTimeout})
		if err != nil {
			return nil, err
		}
		o.Functions = fx
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 60 * time.Second
	}
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = 10 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 60 * time.Second
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 16 * sandbox.KiB
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnections()
	}
	if o.MaxConnectionsPerAddress <= 0 {
		o.MaxConnectionsPerAddress = max(8, o.MaxConnections/4)
	}
	o.MaxConnectionsPerAddress = min(o.MaxConnectionsPerAddress, o.MaxConnections)
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.EventBuffer <= 0 {
		o.EventBuffer = 256
	}
	if o.MaxEventStreams <= 0 {
		o.MaxEventStreams = 64
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	if o.Auth == nil {
		a, err := auth.New(nil, auth.Limits{})
		if err != nil {
			return nil, err
		}
		o.Auth = a
	}
	if o.Peers != nil && !replica.ValidName(o.Replica) {
		return nil, fmt.Errorf("server: replica name %q: must be a DNS label when peers are configured", o.Replica)
	}
	s := &Server{opts: o, log: o.Logger, metrics: o.Metrics, auth: o.Auth, drain: make(chan struct{}), e2b: newE2BSandboxes(),
		uploads: newShares("uploads", CodeTooManyUploads, o.MaxUploads, o.MaxUploadsPerToken, o.AdminUploads,
			"server.max_uploads", "server.max_uploads_per_token", "server.admin_uploads"),
		eventStreams: newShares("event streams", v1.CodeBusy, o.MaxEventStreams, o.MaxEventStreamsPerToken, o.AdminEventStreams,
			"events.max_streams", "events.max_streams_per_token", "events.admin_streams"),
	}
	if o.Peers != nil {
		s.peerTransport = &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			TLSHandshakeTimeout: 5 * time.Second,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     30 * time.Second,
		}
	}
	for _, h := range o.AllowedHosts {
		s.hosts = append(s.hosts, hostOnly(h))
	}
	for _, origin := range o.AllowedOrigins {
		s.origins = append(s.origins, strings.ToLower(strings.TrimSuffix(origin, "/")))
	}
	s.routes = s.routeTable()
	s.handler = s.mux()
	if o.MCP != nil {
		s.mcp = o.MCP(s.handler)
	}
	e := o.Engine
	e.ObserveSessions(s.sessionEvent)
	e.ObservePools(func(ev engine.PoolEvent) {
		s.metrics.PoolEvent(ev.Backend, ev.Template, ev.Event, ev.Ready, ev.Took)
	})
	s.metrics.Gauge("execbox_pool_idle_memory_bytes", "What the ready sandboxes of all warm pools hold (at most pools.max_idle_memory).", func() float64 {
		var n int64
		for _, p := range e.Pools().Pools {
			n += p.IdleMemory
		}
		return float64(n)
	})
	s.metrics.Gauge("execbox_sessions_open", "Sessions open now (at most sessions.max).", func() float64 { return float64(e.OpenSessions()) })
	s.metrics.Gauge("execbox_uploads_in_progress", "Uploads streaming in now (at most server.max_uploads).", func() float64 { return float64(s.uploads.held()) })
	s.metrics.Gauge("execbox_run_slots", "Run slots of every lane (server.max_runs, else the host's cores and each remote backend's capacity).", func() float64 { return float64(e.Admission().Slots) })
	lanes := func(f func(engine.Lane) int) func() map[string]float64 {
		return func() map[string]float64 {
			out := map[string]float64{}
			for _, l := range e.Admission().Lanes {
				out[l.Name] = float64(f(l))
			}
			return out
		}
	}
	s.metrics.GaugeByLabel("execbox_lane_run_slots", "Run slots of a lane: host (the backends on this host), or a remote backend sized by its capacity.", "lane",
		lanes(func(l engine.Lane) int { return l.Slots }))
	s.metrics.GaugeByLabel("execbox_lane_run_slots_in_use", "Run slots of a lane held now.", "lane",
		lanes(func(l engine.Lane) int { return l.InUse }))
	warm := func(f func(sandbox.Warm) int) func() map[string]float64 {
		return func() map[string]float64 {
			out := map[string]float64{}
			for _, name := range e.Names() {
				if b, ok := e.Backend(name); ok {
					if w, ok := b.(sandbox.Warmer); ok {
						n := 0
						for _, shape := range w.Warm() {
							n += f(shape)
						}
						out[name] = float64(n)
					}
				}
			}
			return out
		}
	}
	s.metrics.GaugeByLabel("execbox_warm_machines", "Machines a backend keeps started ahead (its warm pool: Pods, VMs), waiting or on their way, all shapes.", "backend",
		warm(func(w sandbox.Warm) int { return w.Idle + w.Starting }))
	s.metrics.GaugeByLabel("execbox_warm_target", "What a backend's warm pool aims at now, all shapes: the arrivals of the time one takes to start, within its floor and ceiling (GET /v1/health says why).", "backend",
		warm(func(w sandbox.Warm) int { return w.Target }))
	s.metrics.Gauge("execbox_admission_queued", "Runs waiting for a run slot now (at most server.queue_depth).",
		func() float64 { return float64(e.Admission().Queued) })
	s.metrics.Gauge("execbox_run_slots_in_use", "Run slots held now: by runs, and by their results until the answer is written.",
		func() float64 { return float64(e.Admission().SlotsInUse) })
	s.metrics.Gauge("execbox_result_memory_bytes", "The result memory bound (server.max_result_memory).",
		func() float64 { return float64(e.Admission().ResultMemory) })
	s.metrics.Gauge("execbox_result_memory_reserved_bytes", "Result memory reserved by admitted runs (2 × output + artifact_bytes each).",
		func() float64 { return float64(e.Admission().ResultMemoryInUse) })
	s.metrics.Gauge("execbox_connections_open", "Connections open now (Serve's listener).", func() float64 {
		if l := s.conns.Load(); l != nil {
			return float64(l.open())
		}
		return 0
	})
	return s, nil
}

// Handler is the API's handler, for embedding and tests.
func (s *Server) Handler() http.Handler { return s.handler }

// Draining reports whether a shutdown has begun (/readyz is false).
func (s *Server) Draining() bool { return s.draining.Load() }

// Serve answers requests on ln until ctx ends, then shuts down gracefully
// (see the package doc) and returns nil; or returns the error that stopped
// the listener. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// Requests live on base, not ctx: ctx ending starts the drain, while
	// base ends only when in-flight requests must be cancelled.
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	lim := newConnLimiter(ln, s.opts.MaxConnections, s.opts.MaxConnectionsPerAddress, s.metrics)
	s.conns.Store(lim)
	ln = lim
	hs := &http.Server{
		Handler:     s.handler,
		BaseContext: func(net.Listener) context.Context { return base },
		ConnContext: connContext,
		ConnState:   lim.connState,
		// No ReadTimeout or WriteTimeout here: a run's answer comes when
		// the run ends. Each request's body read and each answer's write
		// get their own deadline (wrap, readBody, decodeJSON, streams).
		ReadHeaderTimeout: s.opts.HeaderTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}

	s.draining.Store(true)
	close(s.drain)
	s.log.Info("draining", "drain_delay", s.opts.DrainDelay, "shutdown_timeout", s.opts.ShutdownTimeout)
	if s.opts.DrainDelay > 0 {
		time.Sleep(s.opts.DrainDelay)
	}
	// From here on a new execution on a connection still open is refused
	// 503 draining; the running ones get the shutdown timeout.
	s.closing.Store(true)
	sctx, scancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer scancel()
	if err := hs.Shutdown(sctx); err != nil {
		s.log.Warn("shutdown timeout passed; cancelling in-flight requests", "err", err)
	}
	// Past the deadline (or not): cancel whatever still runs. The engine
	// kills each process tree and closes each sandbox, bounded by its own
	// cleanup timeout.
	cancel()
	s.handlers.Wait()
	// The handlers have returned; let their connections flush the last
	// answers and go idle before the hammer.
	fctx, fcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer fcancel()
	hs.Shutdown(fctx)
	hs.Close()
	<-errc
	if s.peerTransport != nil {
		s.peerTransport.CloseIdleConnections()
	}
	s.log.Info("stopped")
	return nil
}
