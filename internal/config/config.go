package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/execbox/execbox/sandbox"
)

// Config is execbox's effective configuration. The yaml tag of each field is
// its key; a key path joins section and key with a dot ("limits.memory").
// Field types fix the value syntax: time.Duration is a duration, int64 is a
// byte size, []string is a list.
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
	// WorkRoot is where work dirs are made; "" means os.TempDir()/execbox.
	WorkRoot string `yaml:"work_root"`
	// StateDir holds state across restarts; "" means /var/lib/execbox as
	// root, else $XDG_STATE_HOME/execbox.
	StateDir  string           `yaml:"state_dir"`
	Functions FunctionsSection `yaml:"functions"`
	Native    NativeSection    `yaml:"native"`
	Docker    DockerSection    `yaml:"docker"`
	GVisor    GVisorSection    `yaml:"gvisor"`
	Bwrap     BwrapSection     `yaml:"bwrap"`
	Server    ServerSection    `yaml:"server"`
	Auth      AuthSection      `yaml:"auth"`
	Audit     AuditSection     `yaml:"audit"`
	Log       LogSection       `yaml:"log"`
}

// LimitSection mirrors sandbox.Limits plus the cap on per-request walls.
type LimitSection struct {
	Wall            time.Duration `yaml:"wall"`
	MaxWall         time.Duration `yaml:"max_wall"` // largest wall a request may ask for
	Memory          int64         `yaml:"memory"`
	CPUs            float64       `yaml:"cpus"`
	Pids            int           `yaml:"pids"`
	NoFile          int           `yaml:"nofile"`
	FileSize        int64         `yaml:"file_size"`
	TmpSize         int64         `yaml:"tmp_size"`
	WorkSize        int64         `yaml:"work_size"`
	Output          int64         `yaml:"output"`
	OutputLimitKill bool          `yaml:"output_limit_kill"`
	ArtifactFiles   int           `yaml:"artifact_files"`
	ArtifactBytes   int64         `yaml:"artifact_bytes"`
}

// FunctionsSection configures function calls.
type FunctionsSection struct {
	Concurrency  int           `yaml:"concurrency"`   // 0 = number of CPUs
	QueueTimeout time.Duration `yaml:"queue_timeout"` // 0 = answer busy at once
	Timeout      time.Duration `yaml:"timeout"`
}

// NativeSection configures the native backend.
type NativeSection struct {
	RootFS  []string `yaml:"rootfs"` // empty = the backend's default list
	TmpExec bool     `yaml:"tmp_exec"`
	// InitPath names the execbox-init helper; "" = next to the executable,
	// else execbox re-executes itself.
	InitPath string `yaml:"init_path"`
}

// DockerSection configures the docker backend.
type DockerSection struct {
	Host           string        `yaml:"host"` // "" = the Docker client default
	Image          string        `yaml:"image"`
	Runtime        string        `yaml:"runtime"`
	ReuseContainer bool          `yaml:"reuse_container"`
	IdleTimeout    time.Duration `yaml:"idle_timeout"`
}

// GVisorSection configures the gvisor backend.
type GVisorSection struct {
	Runsc string `yaml:"runsc"`
}

// BwrapSection configures the bwrap backend.
type BwrapSection struct {
	Path string `yaml:"path"`
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

// backendSections are the sections a backend decodes itself (BackendSection).
var backendSections = []string{"native", "docker", "gvisor", "bwrap"}

// Default returns the built-in configuration, the bottom layer.
func Default() *Config {
	d := sandbox.Defaults
	return &Config{
		Backend:    "auto",
		Preference: []string{"native", "bwrap", "docker"},
		Limit: LimitSection{
			Wall:          d.Wall,
			MaxWall:       60 * time.Second,
			Memory:        d.Memory,
			CPUs:          d.CPUs,
			Pids:          d.Pids,
			NoFile:        d.NoFile,
			FileSize:      d.FileSize,
			TmpSize:       d.TmpSize,
			WorkSize:      d.WorkSize,
			Output:        d.Output,
			ArtifactFiles: d.ArtifactFiles,
			ArtifactBytes: d.ArtifactBytes,
		},
		EnvAllowlist:   []string{},
		EnvAllowPrefix: []string{},
		Functions:      FunctionsSection{Timeout: 15 * time.Second},
		Native:         NativeSection{RootFS: []string{}},
		Docker:         DockerSection{Image: "execbox-python:latest", IdleTimeout: 5 * time.Minute},
		GVisor:         GVisorSection{Runsc: "runsc"},
		Bwrap:          BwrapSection{Path: "bwrap"},
		Server:         ServerSection{Listen: "127.0.0.1:8080", MaxBody: sandbox.MiB, ShutdownTimeout: 30 * time.Second},
		Auth:           AuthSection{Tokens: []string{}},
		Audit:          AuditSection{MaxAge: 720 * time.Hour, MaxRows: 1_000_000},
		Log:            LogSection{Format: "text", Level: "info"},
	}
}

// Limits returns the configured default limits in the contract's type.
// CPUTime stays zero, so it is derived from Wall.
func (c *Config) Limits() sandbox.Limits {
	l := c.Limit
	return sandbox.Limits{
		Wall:            l.Wall,
		Memory:          l.Memory,
		CPUs:            l.CPUs,
		Pids:            l.Pids,
		NoFile:          l.NoFile,
		FileSize:        l.FileSize,
		TmpSize:         l.TmpSize,
		WorkSize:        l.WorkSize,
		Output:          l.Output,
		OutputLimitKill: l.OutputLimitKill,
		ArtifactFiles:   l.ArtifactFiles,
		ArtifactBytes:   l.ArtifactBytes,
	}
}

// Dirs returns WorkRoot and StateDir with their empty defaults resolved for
// this process: os.TempDir()/execbox, and /var/lib/execbox as root, else
// $XDG_STATE_HOME/execbox ($HOME/.local/state/execbox when unset).
func (c *Config) Dirs() (workRoot, stateDir string, err error) {
	workRoot, stateDir = c.WorkRoot, c.StateDir
	if workRoot == "" {
		workRoot = filepath.Join(os.TempDir(), "execbox")
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

// BackendSection returns a decoder for the named backend's section, fit for
// sandbox.Settings.Decode: it fills v (a pointer to a struct with yaml tags)
// from the effective values of that section as they are at this call, every
// layer applied. A key of
// the section that v has no field for is an error, so a backend and this
// package cannot silently disagree. For a name without a section the
// decoder leaves v unchanged.
func (c *Config) BackendSection(name string) func(v any) error {
	var fields []*field
	for _, s := range backendSections {
		if s == name {
			fields = sectionFields(name)
		}
	}
	if fields == nil {
		return func(any) error { return nil }
	}
	m := &yaml.Node{Kind: yaml.MappingNode}
	for _, f := range fields {
		m.Content = append(m.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: f.name},
			yamlValue(f, f.get(c)))
	}
	doc, err := yaml.Marshal(m)
	return func(v any) error {
		if err != nil {
			return sandbox.Errorf(sandbox.ErrInternal, "config_section", "encoding section %s: %w", name, err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(doc))
		dec.KnownFields(true)
		if err := dec.Decode(v); err != nil {
			return sandbox.Errorf(sandbox.ErrInternal, "config_section", "decoding section %s: %w", name, err)
		}
		return nil
	}
}

// yamlValue encodes a value so that yaml.v3 decodes it back into the same
// Go type (durations as "5m0s" strings, sizes as whole bytes).
func yamlValue(f *field, v any) *yaml.Node {
	scalar := func(tag, s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: s} }
	switch f.kind {
	case kindList:
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, s := range v.([]string) {
			seq.Content = append(seq.Content, scalar("!!str", s))
		}
		return seq
	case kindBool:
		return scalar("!!bool", strconv.FormatBool(v.(bool)))
	case kindInt:
		return scalar("!!int", strconv.Itoa(v.(int)))
	case kindSize:
		return scalar("!!int", strconv.FormatInt(v.(int64), 10))
	case kindFloat:
		return scalar("!!float", strconv.FormatFloat(v.(float64), 'g', -1, 64))
	case kindDuration:
		return scalar("!!str", v.(time.Duration).String())
	default:
		return scalar("!!str", v.(string))
	}
}
