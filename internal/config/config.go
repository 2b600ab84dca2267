package config

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/execbox/execbox/sandbox"
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
	// Preference breaks ties within an isolation level when Backend is auto.
	Preference []string `yaml:"preference"`
	// Limit holds the default limits of every run (key "limits"); per-request
	// values override them, capped by MaxWall.
	Limit LimitSection `yaml:"limits"`
	// EnvAllowlist and EnvAllowPrefix let more host variables into sandboxes.
	EnvAllowlist   []string `yaml:"env_allowlist"`
	EnvAllowPrefix []string `yaml:"env_allowprefix"`
	// RunAsUser runs the local backend's processes as this host user.
	RunAsUser string `yaml:"run_as_user"`
	// WorkRoot is where work dirs are made; "" means
	// sandbox.DefaultWorkRoot(): /run/execbox as root, else
	// $XDG_RUNTIME_DIR/execbox or /tmp/execbox-<uid>. It must be execbox's
	// alone (internal/workdir.MakeRoot checks it at start).
	WorkRoot string `yaml:"work_root"`
	// StateDir holds state across restarts; "" means /var/lib/execbox as
	// root, else $XDG_STATE_HOME/execbox.
	StateDir  string           `yaml:"state_dir"`
	Functions FunctionsSection `yaml:"functions"`
	Server    ServerSection    `yaml:"server"`
	Auth      AuthSection      `yaml:"auth"`
	Audit     AuditSection     `yaml:"audit"`
	Log       LogSection       `yaml:"log"`
	// Backends are the registered backends' sections, by name.
	Backends map[string]any `yaml:"-"`
}

// LimitSection is the contract's Limits (its keys are their JSON names)
// plus the cap on per-request walls.
type LimitSection struct {
	sandbox.Limits `yaml:",inline"`
	MaxWall        time.Duration `yaml:"max_wall"` // largest wall a request may ask for
}

// FunctionsSection configures function calls.
type FunctionsSection struct {
	Concurrency  int           `yaml:"concurrency"`   // 0 = number of CPUs
	QueueTimeout time.Duration `yaml:"queue_timeout"` // 0 = answer busy at once
	Timeout      time.Duration `yaml:"timeout"`
}

// ServerSection configures the HTTP API.
type ServerSection struct {
	Listen  string `yaml:"listen"`
	MaxBody int64  `yaml:"max_body"`
	// MaxRuns is the most runs (POST /v1/runs) at once; more are answered
	// busy. 0 = number of CPUs. Function calls have functions.concurrency.
	MaxRuns int `yaml:"max_runs"`
	// DrainDelay is how long, after SIGTERM, /readyz answers false while
	// requests are still served, so load balancers stop sending new ones.
	DrainDelay time.Duration `yaml:"drain_delay"`
	// ShutdownTimeout is how long in-flight requests may finish after the
	// listener closes; then they are cancelled and their sandboxes closed.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
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
		Limit:          LimitSection{Limits: sandbox.Defaults, MaxWall: 60 * time.Second},
		EnvAllowlist:   []string{},
		EnvAllowPrefix: []string{},
		Functions:      FunctionsSection{Timeout: 15 * time.Second},
		Server:         ServerSection{Listen: "127.0.0.1:8080", MaxBody: sandbox.MiB, ShutdownTimeout: 30 * time.Second},
		Auth:           AuthSection{Tokens: []string{}},
		Audit:          AuditSection{MaxAge: 720 * time.Hour, MaxRows: 1_000_000},
		Log:            LogSection{Format: "text", Level: "info"},
		Backends:       map[string]any{},
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
func (c *Config) Limits() sandbox.Limits { return c.Limit.Limits }

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
