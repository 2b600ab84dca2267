package config

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/tool"
)

// Config is execbox's effective configuration. The yaml tag of each field is
// its key; a key path joins section and key with a dot ("limits.memory").
// Field types fix the value syntax: time.Duration is a duration, int64 is a
// byte size, []string is a list.
//
// Each registered backend owns its section: Backends holds, by backend
// name, the value its sandbox.Registration.Config made, with the keys of
// that type's fields.
type Config struct {
	// Backend is "auto", "off" or a backend name.
	Backend string `yaml:"backend"`
	// AllowUnisolated permits the local backend, which does not isolate.
	AllowUnisolated bool `yaml:"allow_unisolated"`
	// AllowWeakLimits permits a backend whose limits do not bound the
	// sandbox as a whole here (no cgroup, as for a rootless execbox:
	// memory and pids per process, no CPU quota); without it such a
	// backend is refused, never used with weaker bounds silently.
	AllowWeakLimits bool `yaml:"allow_weak_limits"`
	// Preference breaks ties within an isolation level when Backend is auto.
	Preference []string `yaml:"preference"`
	// Limit holds the default limits of every run (key "limits"); a
	// request's own values override them, each at most its maximum.
	Limit sandbox.Limits `yaml:"limits"`
	// MaxLimit holds the largest value a request may ask for, field by field
	// (key "max_limits"; its keys are those of limits but
	// output_limit_kill). Built in: sandbox.HostMaxima(), sized to this
	// host. A request over one is refused naming the field.
	MaxLimit sandbox.Limits `yaml:"max_limits"`
	// EnvAllowlist and EnvAllowPrefix let more host variables into sandboxes.
	EnvAllowlist   []string `yaml:"env_allowlist"`
	EnvAllowPrefix []string `yaml:"env_allowprefix"`
	// RunAsUser runs the local backend's processes as this host user.
	RunAsUser string `yaml:"run_as_user"`
	// Images are the images a run may name (its image field) on a backend
	// that has images (docker); the backend's configured image needs no
	// listing. Empty: a run names none.
	Images []string `yaml:"images"`
	// WorkRoot is where work dirs are made; "" means
	// sandbox.DefaultWorkRoot(): /run/execbox as root, else
	// $XDG_RUNTIME_DIR/execbox or /tmp/execbox-<uid>. It must be execbox's
	// alone (internal/host/workdir.MakeRoot checks it at start).
	WorkRoot string `yaml:"work_root"`
	// StateDir holds state across restarts; "" means /var/lib/execbox as
	// root, else $XDG_STATE_HOME/execbox.
	StateDir   string            `yaml:"state_dir"`
	ImageStore ImageStoreSection `yaml:"image_store"`
	Functions  FunctionsSection  `yaml:"functions"`
	Tools      ToolsSection      `yaml:"tools"`
	Sessions   SessionsSection   `yaml:"sessions"`
	Pools      PoolsSection      `yaml:"pools"`
	Retries    RetriesSection    `yaml:"retries"`
	Events     EventsSection     `yaml:"events"`
	Server     ServerSection     `yaml:"server"`
	Replicas   ReplicasSection   `yaml:"replicas"`
	Auth       AuthSection       `yaml:"auth"`
	Audit      AuditSection      `yaml:"audit"`
	Log        LogSection        `yaml:"log"`
	// Guard decides every execution the server is asked for before it
	// starts: rules (allow, deny or confirm by token, operation, tool,
	// language, backend), per-token budgets and how long a confirmation
	// waits (package internal/daemon/guard).
	Guard guard.Config `yaml:"guard"`
	// Backends are the registered backends' sections, by name.
	Backends map[string]any `yaml:"-"`
}

// ImageStoreSection configures the image store (execbox image pull,
// import, ls, rm), in the state dir's images/.
type ImageStoreSection struct {
	// MaxBytes bounds the store's blobs and unpacked roots together.
	MaxBytes int64 `yaml:"max_bytes"`
}

// FunctionsSection configures function calls.
type FunctionsSection struct {
	Concurrency  int           `yaml:"concurrency"`   // 0 = number of CPUs
	QueueTimeout time.Duration `yaml:"queue_timeout"` // 0 = answer busy at once
	Timeout      time.Duration `yaml:"timeout"`
}

// ToolsSection configures tools (package tool): the built-ins and those
// of Dirs, run each in a sandbox of its own.
type ToolsSection struct {
	// Dirs are tools dirs (absolute paths), in override order: a tool of a
	// later dir replaces a built-in or an earlier dir's tool of the same
	// name. Each is mounted read-only into the sandbox.
	Dirs []string `yaml:"dirs"`
	// ArgsMax is the size up to which a call's arguments travel in the
	// environment; larger ones go through a file in the work dir.
	ArgsMax int `yaml:"args_max"`
	// Timeout is a call's time limit when it sets none.
	Timeout time.Duration `yaml:"timeout"`
}

// SessionsSection bounds sessions: sandboxes that live across execs.
type SessionsSection struct {
	// Max is the most sessions open at once (-1 turns sessions off);
	// PerToken the most one non-admin token holds.
	Max      int `yaml:"max"`
	PerToken int `yaml:"per_token"`
	// TTL is a session's lifetime and IdleTimeout how long it may go
	// unused, unless its request asks for less or more (at most MaxTTL
	// and MaxIdleTimeout).
	TTL            time.Duration `yaml:"ttl"`
	MaxTTL         time.Duration `yaml:"max_ttl"`
	IdleTimeout    time.Duration `yaml:"idle_timeout"`
	MaxIdleTimeout time.Duration `yaml:"max_idle_timeout"`
	// MaxFileMemory bounds what the open sessions' files may hold in this
	// host's memory: each holds its work_size + tmp_size while it is
	// open, and one that does not fit is answered 429 sessions_exhausted
	// (a non-admin token's sessions hold at most half). At most this
	// host's memory; built in half of it (engine.SessionOptions.FileMemory).
	MaxFileMemory int64 `yaml:"max_file_memory"`
}

// PoolsSection configures the warm pools of execbox serve (and execbox
// mcp): sandboxes kept ready, with a function runner waiting in each, so
// that a function call does not wait for a sandbox to start. Each is used
// for one call and then removed.
type PoolsSection struct {
	// Size is how many ready sandboxes each pool keeps; 0 turns pools off.
	Size int `yaml:"size"`
	// Backends are the backends pooled; empty means the one a request that
	// names none gets (auto's pick).
	Backends []string `yaml:"backends"`
	// Languages are the runners pooled: python, javascript.
	Languages []string `yaml:"languages"`
	// MaxIdleMemory caps what all idle pooled sandboxes hold together
	// (measured through their cgroups; a backend that cannot say counts
	// each at its memory limit).
	MaxIdleMemory int64 `yaml:"max_idle_memory"`
	// Refill is how many sandboxes are made at once, for all pools.
	Refill int `yaml:"refill"`
	// MaxAge is how long a sandbox waits in a pool before it is replaced.
	MaxAge time.Duration `yaml:"max_age"`
}

// RetriesSection says how an execution is tried again after an
// infrastructure fault (a backend unavailable, a sandbox that failed to
// start); never after the program may have started.
type RetriesSection struct {
	// Max is how many times (0–10).
	Max int `yaml:"max"`
	// Backoff is the wait before the first retry; each next one doubles,
	// with jitter.
	Backoff time.Duration `yaml:"backoff"`
}

// EventsSection configures the delivery of lifecycle events: the
// server's GET /v1/events streams and the webhook.
type EventsSection struct {
	// StreamBuffer is how many events one stream may hold unsent before
	// it loses them; MaxStreams how many streams are open at once.
	StreamBuffer int `yaml:"stream_buffer"`
	MaxStreams   int `yaml:"max_streams"`
	// MaxStreamsPerToken is the most streams one non-admin token holds
	// open; 0 = half of max_streams (at least 1). AdminStreams of them
	// are kept for admin tokens (at most max_streams − 1). Both apply when
	// tokens are configured.
	MaxStreamsPerToken int `yaml:"max_streams_per_token"`
	AdminStreams       int `yaml:"admin_streams"`
	// WebhookURL, when set, gets every event POSTed, signed with the
	// HMAC-SHA256 key in WebhookSecretFile (at least 16 bytes), each try
	// bounded by WebhookTimeout, a failed one tried WebhookRetries times
	// more; at most WebhookQueue events wait (more are dropped, counted).
	WebhookURL        string        `yaml:"webhook_url"`
	WebhookSecretFile string        `yaml:"webhook_secret_file"`
	WebhookTimeout    time.Duration `yaml:"webhook_timeout"`
	WebhookRetries    int           `yaml:"webhook_retries"`
	WebhookQueue      int           `yaml:"webhook_queue"`
}

// ServerSection configures the HTTP API.
type ServerSection struct {
	Listen  string `yaml:"listen"`
	MaxBody int64  `yaml:"max_body"`
	// MaxRuns is the most runs (POST /v1/runs) at once, on every backend
	// together; more are answered busy. 0 = by where they run: the
	// backends on this host share its number of CPUs, a remote one
	// has what bounds it (kubernetes: its namespace's ResourceQuota, else
	// its nodes' allocatable; docker on an engine over TCP: that engine's
	// CPUs and memory). Function calls have functions.concurrency.
	MaxRuns int `yaml:"max_runs"`
	// MaxRunsPerToken is the most run slots one non-admin token holds at
	// once, in each lane; 0 = half of the lane's (at least 1). Applies
	// when tokens are configured.
	MaxRunsPerToken int `yaml:"max_runs_per_token"`
	// AdminRuns are run slots only admin tokens may take, so that no other
	// token can lock an admin out; at most max_runs − 1 of them are kept
	// (none with one slot). Applies when tokens are configured.
	AdminRuns int `yaml:"admin_runs"`
	// QueueDepth runs may wait for a run slot, each at most QueueWait,
	// before a run is answered busy (429 with Retry-After): a burst is
	// served, not refused. 0 (either) answers busy at once.
	QueueDepth int           `yaml:"queue_depth"`
	QueueWait  time.Duration `yaml:"queue_wait"`
	// MaxResultMemory bounds the output and artifacts the runs in flight
	// may hold: each run reserves 2 × output + artifact_bytes of its limits
	// from admission until its answer is written, and one that does not
	// fit is answered busy. Built in: 1/8 of this host's memory, within
	// 256m–4g.
	MaxResultMemory int64 `yaml:"max_result_memory"`
	// WriteTimeout bounds writing one answer (and each event of a stream)
	// from its first byte: a client that does not read is cut off, and its
	// run slot freed.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// MinBodyRate is the slowest a request body may come, in bytes per
	// second, over each 30 s of waiting for it: an upload's body slower
	// than that is cut (408 body_timeout), and any body behind it no
	// longer keeps its connection from being closed for a new one.
	MinBodyRate int64 `yaml:"min_body_rate"`
	// MaxUploads is the most uploads (PUT …/files/{path}, POST …/upload)
	// streaming in at once; MaxUploadsPerToken the most of one non-admin
	// token (0 = half of max_uploads, at least 1); AdminUploads of them
	// are kept for admin tokens (at most max_uploads − 1). Past a bound an
	// upload is answered 429 too_many_uploads. The shares apply when
	// tokens are configured.
	MaxUploads         int `yaml:"max_uploads"`
	MaxUploadsPerToken int `yaml:"max_uploads_per_token"`
	AdminUploads       int `yaml:"admin_uploads"`
	// MaxConnections is the most connections open at once, and
	// MaxConnectionsPerAddress the most from one remote address; past them
	// the oldest connection not serving an authenticated request is closed
	// for the new one. 0 = from the open-file limit (half of it, within
	// 16–4096) and a quarter of max_connections (at least 8).
	MaxConnections           int `yaml:"max_connections"`
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
	// MaxHeaderBytes bounds a request's header (431 over it).
	MaxHeaderBytes int64 `yaml:"max_header_bytes"`
	// AllowedHosts are the host names (besides IP addresses, localhost and
	// the listen address's host) a request's Host may name; others are
	// refused (DNS rebinding). "*" allows any.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// AllowedOrigins are the web origins ("https://app.example.com") whose
	// pages may call the API from a browser (CORS); other cross-origin
	// requests are refused.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// PublicMetrics serves /metrics without a token.
	PublicMetrics bool `yaml:"public_metrics"`
	// Playground serves the web playground at "/" (its pages and assets
	// need no token; every API call they make does).
	Playground bool `yaml:"playground"`
	// DrainDelay is how long, after SIGTERM, /readyz answers false while
	// requests are still served, so load balancers stop sending new ones.
	DrainDelay time.Duration `yaml:"drain_delay"`
	// ShutdownTimeout is how long in-flight requests may finish after the
	// listener closes; then they are cancelled and their sandboxes closed.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
}

// ReplicasSection lets several execbox serve replicas of one deployment
// share the session API (package internal/daemon/replica): a session lives in
// the replica that made it, its id begins with that replica's name, and
// any replica passes a request about it to that one.
type ReplicasSection struct {
	// Name is this replica's name (a DNS label; on Kubernetes its Pod's
	// name). "" = alone.
	Name string `yaml:"name"`
	// Peers are the other replicas, "name=http://host:port" each.
	Peers []string `yaml:"peers"`
	// Pods finds a replica instead as the Pod of its name in this Pod's
	// namespace that carries these labels (a label selector), through the
	// API server, reached at its IP on Port (0: server.listen's port).
	Pods string `yaml:"pods"`
	Port int    `yaml:"port"`
}

// AuthSection configures the HTTP API's bearer tokens. EXECBOX_TOKEN adds
// one admin token named "default".
type AuthSection struct {
	// Tokens are "NAME:SHA256HEX[:OPTION]..." entries: the name shown in
	// logs and the audit log, the hex SHA-256 of the secret, and options
	// admin, concurrency=N, rate=R (requests per second), burst=N.
	Tokens []string `yaml:"tokens"`
	// Concurrency, Rate and Burst are the per-token limits of tokens that
	// set none; 0 means unlimited (Burst 0: one second of Rate).
	Concurrency int     `yaml:"concurrency"`
	Rate        float64 `yaml:"rate"`
	Burst       int     `yaml:"burst"`
	// FailureRate and FailureBurst bound failed authentications per remote
	// address (per second, and at once): past them the address's requests
	// are answered 429 without their token being checked. 0 = no bound.
	FailureRate  float64 `yaml:"failure_rate"`
	FailureBurst int     `yaml:"failure_burst"`
}

// AuditSection configures the audit log.
type AuditSection struct {
	Path      string        `yaml:"path"` // "" = no audit log
	StoreCode bool          `yaml:"store_code"`
	MaxAge    time.Duration `yaml:"max_age"`
	MaxRows   int           `yaml:"max_rows"` // 0 = no bound on the row count
}

// LogSection configures execbox's own log.
type LogSection struct {
	Format string `yaml:"format"` // text | json
	Level  string `yaml:"level"`  // debug | info | warn | error
}

// Default returns the built-in configuration, the bottom layer, with a
// section for every backend registered so far.
func Default() *Config {
	c := &Config{
		Backend:        "auto",
		Preference:     []string{"native", "bwrap", "docker"},
		Limit:          sandbox.Defaults,
		MaxLimit:       sandbox.HostMaxima(),
		EnvAllowlist:   []string{},
		EnvAllowPrefix: []string{},
		ImageStore:     ImageStoreSection{MaxBytes: 10 * sandbox.GiB},
		Functions:      FunctionsSection{Timeout: 15 * time.Second},
		Tools:          ToolsSection{ArgsMax: tool.DefaultArgsMax, Timeout: tool.DefaultTimeout},
		Sessions: SessionsSection{Max: 64, PerToken: 8, TTL: 30 * time.Minute, MaxTTL: 24 * time.Hour,
			IdleTimeout: 10 * time.Minute, MaxIdleTimeout: 24 * time.Hour, MaxFileMemory: sandbox.HostSessionMemory()},
		Pools: PoolsSection{Size: 2, Backends: []string{}, Languages: []string{"python", "javascript"},
			MaxIdleMemory: sandbox.GiB, Refill: 1, MaxAge: 10 * time.Minute},
		Retries: RetriesSection{Max: 3, Backoff: 200 * time.Millisecond},
		Guard:   guard.Config{Default: guard.Allow, Approvals: guard.Approvals{Timeout: 5 * time.Minute, MaxPending: 64, AdminPending: 1}},
		Events:  EventsSection{StreamBuffer: 256, MaxStreams: 64, AdminStreams: 1, WebhookTimeout: 5 * time.Second, WebhookRetries: 3, WebhookQueue: 1024},
		Server: ServerSection{
			Listen: "127.0.0.1:8080", MaxBody: sandbox.MiB, AdminRuns: 1, QueueDepth: 64, QueueWait: 10 * time.Second, MaxResultMemory: DefaultResultMemory(sandbox.HostMemory()),
			WriteTimeout: 60 * time.Second, MinBodyRate: 4 * sandbox.KiB, MaxUploads: 64, AdminUploads: 1,
			MaxHeaderBytes: 16 * sandbox.KiB, AllowedHosts: []string{}, AllowedOrigins: []string{},
			ShutdownTimeout: 30 * time.Second, Playground: true,
		},
		Replicas: ReplicasSection{Peers: []string{}},
		Auth:     AuthSection{Tokens: []string{}, FailureRate: 1, FailureBurst: 10},
		Audit:    AuditSection{MaxAge: 720 * time.Hour, MaxRows: 1_000_000},
		Log:      LogSection{Format: "text", Level: "info"},
		Backends: map[string]any{},
	}
	for _, name := range sandbox.Names() {
		if r, _ := sandbox.Lookup(name); r.Config != nil {
			c.Backends[name] = r.Config()
		}
	}
	return c
}

// Limits returns the configured default limits in the contract's type.
// CPUTime stays zero unless set, so it is derived from Wall.
func (c *Config) Limits() sandbox.Limits { return c.Limit }

// DefaultResultMemory is server.max_result_memory's built-in value for a
// host with ram bytes of memory: sandbox.ResultMemoryFor, an eighth of it
// within 256 MiB–4 GiB.
func DefaultResultMemory(ram int64) int64 { return sandbox.ResultMemoryFor(ram) }

// BackendConfig returns the named backend's section, for
// sandbox.Settings.Config; nil when it has none.
func (c *Config) BackendConfig(name string) any { return c.Backends[name] }

// Dirs returns WorkRoot and StateDir with their empty defaults resolved for
// this process: sandbox.DefaultWorkRoot(), and /var/lib/execbox as root,
// else $XDG_STATE_HOME/execbox ($HOME/.local/state/execbox when unset).
func (c *Config) Dirs() (workRoot, stateDir string, err error) {
	workRoot, stateDir = c.WorkRoot, c.StateDir
	if workRoot == "" {
		workRoot = sandbox.DefaultWorkRoot()
	}
	if stateDir != "" {
		return workRoot, stateDir, nil
	}
	if os.Geteuid() == 0 {
		return workRoot, "/var/lib/execbox", nil
	}
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return workRoot, filepath.Join(x, "execbox"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", "", fmt.Errorf("finding the state dir (set state_dir): %w", err)
	}
	return workRoot, filepath.Join(home, ".local", "state", "execbox"), nil
}
