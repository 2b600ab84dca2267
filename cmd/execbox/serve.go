package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/daemon/config"
	"github.com/execbox/execbox/internal/daemon/metrics"
	"github.com/execbox/execbox/internal/daemon/replica"
	"github.com/execbox/execbox/internal/daemon/server"
	"github.com/execbox/execbox/internal/daemon/webhook"
	"github.com/execbox/execbox/sandbox"
)

func newServeCmd(g *globals) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API",
		Long: `serve answers the HTTP API v1 (described at /v1/openapi.json): runs,
function calls and lints, health, backends, metrics and the audit log.

Clients authenticate with bearer tokens: EXECBOX_TOKEN=<secret> (one admin
token named "default") or auth.tokens entries NAME:SHA256HEX[:admin]
[:concurrency=N][:rate=R][:burst=N], where SHA256HEX is the output of
printf %s SECRET | sha256sum. With no token, serve listens only on a
loopback address.

The bound address is logged ("listening", addr=…); --listen 127.0.0.1:0
picks a free port. Requests must name the server in Host (an IP address,
localhost, the --listen name or server.allowed_hosts); browser pages of
other origins are refused unless listed in server.allowed_origins; bodies
must be application/json. Every limit a request sets has a maximum
(max_limits), a run holds its slot and result memory until its answer is
written (server.max_result_memory, server.write_timeout), and
connections are bounded (server.max_connections[_per_address]). On SIGTERM or SIGINT, /readyz turns false, requests are
still served for server.drain_delay, then the listener closes and in-flight
requests get server.shutdown_timeout before they are cancelled.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd.Context(), g, listen) },
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on, HOST:PORT (default server.listen, 127.0.0.1:8080)")
	return cmd
}

func runServe(ctx context.Context, g *globals, listen string) error {
	cfg, _, err := g.loadConfig()
	if err != nil {
		return err
	}
	if listen != "" {
		cfg.Server.Listen = listen
	}
	log := newLogger(os.Stderr, cfg.Log)
	secret, secretSet := os.LookupEnv("EXECBOX_TOKEN")
	tokens, err := configuredTokens(cfg, secret, secretSet)
	if err != nil {
		return err
	}
	authn, err := auth.New(tokens, auth.Limits{Concurrency: cfg.Auth.Concurrency, Rate: cfg.Auth.Rate, Burst: cfg.Auth.Burst,
		FailureRate: cfg.Auth.FailureRate, FailureBurst: cfg.Auth.FailureBurst})
	if err != nil {
		return err
	}

	if r := cfg.Guard.Confirms(); r != "" && !authn.HasAdmin() {
		return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid",
			"guard: %q holds calls for an admin's decision, but no admin token is configured to decide them (auth.tokens with :admin, or EXECBOX_TOKEN)", r)
	}
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return sandbox.Errorf(sandbox.ErrUnavailable, "listen_failed", "listening on %s: %w", cfg.Server.Listen, err)
	}
	defer ln.Close()
	if !isLoopback(ln.Addr()) && !authn.Enabled() {
		return sandbox.Errorf(sandbox.ErrDenied, "listen_insecure",
			"refusing to serve on %s: it is not a loopback address and no API token is configured; "+
				"set EXECBOX_TOKEN=<secret> or auth.tokens, or listen on 127.0.0.1", ln.Addr())
	}

	m := metrics.New()
	bus := &event.Bus{OnDrop: m.EventDropped}
	if cfg.Events.WebhookURL != "" {
		hook, err := startWebhook(cfg.Events, bus, m, log)
		if err != nil {
			return err
		}
		// Closed last, after the engine (deferred first): the sessions it
		// closes at shutdown are events too; the last ones get 5 s.
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			hook.Close(ctx)
		}()
	}
	e, store, closeAll, err := startEngine(cfg, log, func(o *engine.Options) { o.AdmissionObserver, o.Events = m.AdmissionWait, bus })
	if err != nil {
		return err
	}
	defer closeAll()
	// The name the server was told to listen on is one of its names.
	hosts := cfg.Server.AllowedHosts
	if h, _, err := net.SplitHostPort(cfg.Server.Listen); err == nil && h != "" && net.ParseIP(h) == nil {
		hosts = append(slices.Clone(hosts), h)
	}
	gd, tools, err := guardAndTools(cfg)
	if err != nil {
		return err
	}
	peers, err := replicaFinder(cfg.Replicas, ln.Addr())
	if err != nil {
		return err
	}
	fx, err := newFunctions(cfg, e)
	if err != nil {
		return err
	}
	srv, err := server.New(server.Options{
		Functions:                fx,
		Replica:                  cfg.Replicas.Name,
		Peers:                    peers,
		Guard:                    gd,
		Tools:                    tools,
		MCP:                      mcpHandler,
		Metrics:                  m,
		Engine:                   e,
		Auth:                     authn,
		Audit:                    store,
		Logger:                   log,
		MaxBody:                  cfg.Server.MaxBody,
		WriteTimeout:             cfg.Server.WriteTimeout,
		MinBodyRate:              cfg.Server.MinBodyRate,
		MaxUploads:               cfg.Server.MaxUploads,
		MaxUploadsPerToken:       cfg.Server.MaxUploadsPerToken,
		AdminUploads:             cfg.Server.AdminUploads,
		MaxHeaderBytes:           int(cfg.Server.MaxHeaderBytes),
		MaxConnections:           cfg.Server.MaxConnections,
		MaxConnectionsPerAddress: cfg.Server.MaxConnectionsPerAddress,
		AllowedHosts:             hosts,
		AllowedOrigins:           cfg.Server.AllowedOrigins,
		PublicMetrics:            cfg.Server.PublicMetrics,
		EventBuffer:              cfg.Events.StreamBuffer,
		MaxEventStreams:          cfg.Events.MaxStreams,
		MaxEventStreamsPerToken:  cfg.Events.MaxStreamsPerToken,
		AdminEventStreams:        cfg.Events.AdminStreams,
		Playground:               cfg.Server.Playground,
		FunctionTimeout:          cfg.Functions.Timeout,
		DrainDelay:               cfg.Server.DrainDelay,
		ShutdownTimeout:          cfg.Server.ShutdownTimeout,
	})
	if err != nil {
		return err
	}
	// A soft memory limit makes the collector work harder before the heap
	// outgrows what the results in flight may hold, rather than letting
	// garbage double it (GOGC): unless GOMEMLIMIT says otherwise.
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(memoryLimit(cfg))
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String(),
		"tokens", authn.Names(), "audit", cfg.Audit.Path, "backend", cfg.Backend)
	return srv.Serve(ctx, ln)
}

// replicaFinder is how this replica finds the others (nil: alone).
func replicaFinder(c config.ReplicasSection, addr net.Addr) (replica.Finder, error) {
	switch {
	case len(c.Peers) > 0:
		return replica.ParsePeers(c.Peers)
	case c.Pods != "":
		port := c.Port
		if port == 0 {
			port = addr.(*net.TCPAddr).Port
		}
		f, err := replica.NewPods(c.Pods, port)
		if err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "%w", err)
		}
		return f, nil
	}
	return nil, nil
}

// startWebhook starts delivering bus's events to the configured webhook,
// its secret read from its file (which only its owner may read).
func startWebhook(ev config.EventsSection, bus *event.Bus, m *metrics.Metrics, log *slog.Logger) (*webhook.Sender, error) {
	st, err := os.Stat(ev.WebhookSecretFile)
	if err == nil && st.Mode().Perm()&0o077 != 0 {
		err = fmt.Errorf("mode %04o: others may read it (chmod 600)", st.Mode().Perm())
	}
	var secret []byte
	if err == nil {
		secret, err = os.ReadFile(ev.WebhookSecretFile)
	}
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "events.webhook_secret_file %s: %v", ev.WebhookSecretFile, err)
	}
	s, err := webhook.Start(bus, webhook.Options{URL: ev.WebhookURL, Secret: bytes.TrimSpace(secret), Timeout: ev.WebhookTimeout,
		Retries: cmp.Or(ev.WebhookRetries, -1), Queue: ev.WebhookQueue, Logger: log, OnResult: m.WebhookDelivery})
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "events: %v", err)
	}
	return s, nil
}

// memoryLimit is serve's soft memory limit: the result memory, the
// request bodies the connections may hold, and room for the rest.
func memoryLimit(cfg *config.Config) int64 {
	return cfg.Server.MaxResultMemory + 4*cfg.Server.MaxBody + 256*sandbox.MiB
}

// configuredTokens are auth.tokens plus EXECBOX_TOKEN's "default" token.
func configuredTokens(cfg *config.Config, secret string, secretSet bool) ([]auth.Token, error) {
	var tokens []auth.Token
	for i, entry := range cfg.Auth.Tokens {
		t, err := auth.ParseToken(entry)
		if err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "auth.tokens[%d]: %w", i, err)
		}
		tokens = append(tokens, t)
	}
	if secretSet && secret == "" {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "EXECBOX_TOKEN is set but empty")
	}
	if secret != "" {
		tokens = append(tokens, auth.FromSecret(secret))
	}
	return tokens, nil
}

// isLoopback reports whether a listener's address is reachable only from
// this host.
func isLoopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

// newLogger makes execbox's logger from the log section.
func newLogger(w io.Writer, l config.LogSection) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.Level)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// startEngine builds and starts the engine the configuration describes,
// with its warm pools (the long-running commands keep them; a one-shot
// command would only pay for them), and opens its audit log (nil when none
// is configured); closeAll undoes both.
func startEngine(cfg *config.Config, log *slog.Logger, more ...func(*engine.Options)) (e *engine.Engine, store *audit.Store, closeAll func(), err error) {
	more = append([]func(*engine.Options){func(o *engine.Options) { o.Pools = poolOptions(cfg) }}, more...)
	if e, err = newEngine(cfg, more...); err != nil {
		return nil, nil, nil, err
	}
	e.Start()
	if cfg.Audit.Path != "" {
		store, err = audit.Open(cfg.Audit.Path, audit.Options{
			StoreCode: cfg.Audit.StoreCode, MaxAge: cfg.Audit.MaxAge, MaxRows: cfg.Audit.MaxRows, Logger: log,
		})
		if err != nil {
			e.Close()
			return nil, nil, nil, err
		}
	}
	return e, store, func() {
		// The engine first: closing its sessions writes audit rows.
		e.Close()
		if store != nil {
			store.Close()
		}
	}, nil
}
