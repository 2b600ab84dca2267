package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/daemon/config"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/internal/host/workdir"
	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/tool"
)

// loadConfig applies every layer: defaults < file < environment < --set.
func (g *globals) loadConfig() (*config.Config, *config.Provenance, error) {
	flags := map[string]string{}
	for _, kv := range g.set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, nil, sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "--set %q: want key=value", kv)
		}
		flags[k] = v
	}
	return config.Load(g.configPath, os.Environ(), flags)
}

// newEngine builds the engine the configuration describes.
func newEngine(cfg *config.Config, more ...func(*engine.Options)) (*engine.Engine, error) {
	workRoot, stateDir, err := cfg.Dirs()
	if err != nil {
		return nil, err
	}
	// The work root is execbox's alone, or nothing starts: a root another
	// user made first, or a symlink on its path, is refused here, before a
	// backend reconciles (deletes) anything in it.
	if err := workdir.MakeRoot(workRoot); err != nil {
		return nil, err
	}
	o := engine.Options{
		Backend:         cfg.Backend,
		AllowUnisolated: cfg.AllowUnisolated,
		AllowWeakLimits: cfg.AllowWeakLimits,
		Preference:      cfg.Preference,
		Defaults:        cfg.Limits(),
		Max:             cfg.MaxLimit,
		Policy:          policy(cfg),
		Images:          cfg.Images,
		Roots:           storeRoots(cfg, stateDir),
		HealthCache:     filepath.Join(stateDir, "health.json"),
		MaxRuns:         cfg.Server.MaxRuns,
		ReservedRuns:    cfg.Server.AdminRuns,
		OwnerRuns:       cfg.Server.MaxRunsPerToken,
		ResultMemory:    cfg.Server.MaxResultMemory,
		QueueDepth:      cfg.Server.QueueDepth,
		QueueWait:       cfg.Server.QueueWait,
		Sessions: engine.SessionOptions{
			Max: cfg.Sessions.Max, PerOwner: cfg.Sessions.PerToken,
			TTL: cfg.Sessions.TTL, MaxTTL: cfg.Sessions.MaxTTL, Idle: cfg.Sessions.IdleTimeout, MaxIdle: cfg.Sessions.MaxIdleTimeout,
			FileMemory: cfg.Sessions.MaxFileMemory,
			Replica:    cfg.Replicas.Name,
		},
		Retries: engine.RetryOptions{Max: cmp.Or(cfg.Retries.Max, -1), Backoff: cfg.Retries.Backoff},
		Settings: func(name string) sandbox.Settings {
			return sandbox.Settings{
				Config:   cfg.BackendConfig(name),
				StateDir: stateDir,
				WorkRoot: workRoot,
				Instance: fmt.Sprintf("cli-%d", os.Getpid()),
				Defaults: cfg.Limits(),
			}
		},
	}
	o.Configured = configured(cfg)
	for _, f := range more {
		f(&o)
	}
	e, err := engine.New(o)
	if err != nil {
		return nil, err
	}
	if err := e.Pool(poolTemplates(functionOptions(cfg), cfg.Pools.Languages)...); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// poolOptions are the configured warm pools.
func poolOptions(cfg *config.Config) engine.PoolOptions {
	p := cfg.Pools
	return engine.PoolOptions{Size: p.Size, Backends: p.Backends, MaxIdleMemory: p.MaxIdleMemory, Refill: p.Refill, MaxAge: p.MaxAge}
}

// poolTemplates are what the warm pools keep ready: the function runner
// of each language (none listed: python and javascript), started as an
// executor made with o starts it.
func poolTemplates(o function.Options, languages []string) []engine.PoolTemplate {
	if len(languages) == 0 {
		languages = []string{string(function.Python), string(function.JavaScript)}
	}
	var ts []engine.PoolTemplate
	for _, l := range languages {
		spec, args := function.Template(function.Language(l), o)
		ts = append(ts, engine.PoolTemplate{Name: l, Spec: spec, Args: args, MaxCall: function.MaxTimeout})
	}
	return ts
}

// functionOptions are the configured function executor's.
func functionOptions(cfg *config.Config) function.Options {
	return function.Options{
		Concurrency:    cfg.Functions.Concurrency,
		QueueTimeout:   cfg.Functions.QueueTimeout,
		DefaultTimeout: cfg.Functions.Timeout,
	}
}

// newFunctions is the configured function executor: calls and lints run
// through e (its selection, policy, limits and warm pools).
func newFunctions(cfg *config.Config, e *engine.Engine) (*function.Executor, error) {
	return function.New(function.EngineFunc(e.Call), functionOptions(cfg))
}

// policy is the configured part of every request's sandbox policy.
// configured names the settings cfg holds at other values than execbox's
// defaults: the limits (JSON names) and "backend" (a run's Result.Sources
// says "config" for them).
func configured(cfg *config.Config) map[string]bool {
	def := config.Default()
	out := map[string]bool{}
	for _, n := range cfg.Limits().Differ(def.Limits()) {
		out[n] = true
	}
	if cfg.Backend != def.Backend {
		out["backend"] = true
	}
	return out
}

func policy(cfg *config.Config) sandbox.Policy {
	return sandbox.Policy{
		EnvAllowlist:   cfg.EnvAllowlist,
		EnvAllowPrefix: cfg.EnvAllowPrefix,
		RunAsUser:      cfg.RunAsUser,
	}
}

// guardAndTools are what an API server (serve, mcp) puts around its
// executions: the configured guard and tools.
func guardAndTools(cfg *config.Config) (*guard.Guard, *tool.Set, error) {
	gd, err := guard.New(cfg.Guard)
	if err != nil {
		return nil, nil, err
	}
	tools, err := newTools(cfg)
	if err != nil {
		return nil, nil, err
	}
	return gd, tools, nil
}

// newTools is the configured tools: the built-ins and tools.dirs, with the
// tools' runtime written under the state dir.
func newTools(cfg *config.Config) (*tool.Set, error) {
	_, stateDir, err := cfg.Dirs()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("making the state dir: %w", err)
	}
	return tool.New(tool.Options{Dirs: cfg.Tools.Dirs, ArgsMax: cfg.Tools.ArgsMax, Timeout: cfg.Tools.Timeout,
		RuntimeDir: filepath.Join(stateDir, "tool-runtime")})
}
