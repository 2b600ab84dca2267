package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/execbox/execbox/internal/daemon/replica"
	"github.com/execbox/execbox/internal/daemon/webhook"
	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/tool"
)

// Validate checks the configuration as a whole. Backend names are the
// engine's to check; here Backend must only be non-empty. The error is
// ErrInvalid naming the key.
func (c *Config) Validate() error { return c.validate(nil) }

// validate is Validate, adding where the offending value came from when p
// knows.
func (c *Config) validate(p *Provenance) error {
	key, msg := c.check()
	if key == "" {
		key, msg = c.checkBackends()
	}
	if key == "" {
		return nil
	}
	if s := p.Source(key); s.Origin != FromDefault {
		msg += " (set by " + s.String() + ")"
	}
	return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "%s: %s", key, msg)
}

// check returns the first key that is wrong and why, or "" for none.
func (c *Config) check() (key, msg string) {
	l, m := c.Limit, c.MaxLimit
	type rule struct {
		key string
		bad bool
		msg string
	}
	_, peersErr := replica.ParsePeers(c.Replicas.Peers)
	host := sandbox.HostMemory()
	positive := func(key string, bad bool) rule {
		return rule{key, bad, "must be above 0 (0 would silently mean the built-in default)"}
	}
	rules := []rule{
		{"backend", c.Backend == "", `must not be empty (use "auto" or "off")`},
		{"backend", c.Backend == "local" && !c.AllowUnisolated, "local runs code without isolation: it needs allow_unisolated: true"},
		{"preference", hasBlankOrDup(c.Preference), "must not hold empty or repeated names"},
		{"images", hasBlankOrDup(c.Images), "must not hold empty or repeated names"},
		positive("limits.wall", l.Wall <= 0),
		positive("limits.memory", l.Memory <= 0),
		{"limits.memory", l.Memory < 4*sandbox.MiB, "must be at least 4m"},
		positive("limits.cpus", l.CPUs <= 0),
		positive("limits.pids", l.Pids <= 0),
		positive("limits.nofile", l.NoFile <= 0),
		positive("limits.file_size", l.FileSize <= 0),
		positive("limits.tmp_size", l.TmpSize <= 0),
		positive("limits.work_size", l.WorkSize <= 0),
		positive("limits.output", l.Output <= 0),
		positive("limits.artifact_files", l.ArtifactFiles <= 0),
		positive("limits.artifact_bytes", l.ArtifactBytes <= 0),
		positive("max_limits.wall", m.Wall <= 0),
		positive("max_limits.cpu_time", m.CPUTime <= 0),
		positive("max_limits.memory", m.Memory <= 0),
		{"max_limits.memory", m.Memory < 4*sandbox.MiB, "must be at least 4m"},
		positive("max_limits.cpus", m.CPUs <= 0),
		positive("max_limits.pids", m.Pids <= 0),
		positive("max_limits.nofile", m.NoFile <= 0),
		positive("max_limits.file_size", m.FileSize <= 0),
		positive("max_limits.tmp_size", m.TmpSize <= 0),
		positive("max_limits.work_size", m.WorkSize <= 0),
		positive("max_limits.output", m.Output <= 0),
		positive("max_limits.artifact_files", m.ArtifactFiles <= 0),
		positive("max_limits.artifact_bytes", m.ArtifactBytes <= 0),
		{"env_allowlist", !allEnvNames(c.EnvAllowlist), "must hold variable names (not empty, no '=')"},
		{"env_allowprefix", !allEnvNames(c.EnvAllowPrefix), "must hold name prefixes (not empty, no '=')"},
		{"work_root", c.WorkRoot != "" && !filepath.IsAbs(c.WorkRoot), "must be an absolute path"},
		{"state_dir", c.StateDir != "" && !filepath.IsAbs(c.StateDir), "must be an absolute path"},
		{"functions.concurrency", c.Functions.Concurrency < 0, "must not be negative (0 = number of CPUs)"},
		{"functions.queue_timeout", c.Functions.QueueTimeout < 0, "must not be negative"},
		positive("functions.timeout", c.Functions.Timeout <= 0),
		{"functions.timeout", c.Functions.Timeout > m.Wall, fmt.Sprintf("%s is above max_limits.wall (%s)", sandbox.FormatDuration(c.Functions.Timeout), sandbox.FormatDuration(m.Wall))},
		{"sessions.max", c.Sessions.Max < -1, "must be -1 (off), 0 (the default, 64) or more"},
		{"sessions.per_token", c.Sessions.PerToken < 0, "must not be negative"},
		{"sessions.ttl", c.Sessions.TTL < 0, "must not be negative"},
		{"sessions.idle_timeout", c.Sessions.IdleTimeout < 0, "must not be negative"},
		{"sessions.ttl", c.Sessions.MaxTTL > 0 && c.Sessions.TTL > c.Sessions.MaxTTL, "is above sessions.max_ttl"},
		{"sessions.idle_timeout", c.Sessions.MaxIdleTimeout > 0 && c.Sessions.IdleTimeout > c.Sessions.MaxIdleTimeout, "is above sessions.max_idle_timeout"},
		positive("sessions.max_file_memory", c.Sessions.MaxFileMemory <= 0),
		positive("image_store.max_bytes", c.ImageStore.MaxBytes <= 0),
		{"sessions.max_file_memory", c.Sessions.MaxFileMemory > host, fmt.Sprintf(
			"%s is beyond this host's memory, %s: the open sessions' files could take more than there is",
			sandbox.FormatSize(c.Sessions.MaxFileMemory), sandbox.FormatSize(host))},
		{"sessions.max_file_memory", c.Sessions.MaxFileMemory > 0 && c.Sessions.MaxFileMemory < m.WorkSize+m.TmpSize, fmt.Sprintf(
			"%s cannot hold one session at the maxima: want at least max_limits.work_size + max_limits.tmp_size = %s",
			sandbox.FormatSize(c.Sessions.MaxFileMemory), sandbox.FormatSize(m.WorkSize+m.TmpSize))},
		{"tools.dirs", !allAbs(c.Tools.Dirs), "must hold absolute paths, each at most once"},
		{"tools.args_max", c.Tools.ArgsMax < 1 || c.Tools.ArgsMax > 100000, "must be 1 to 100000 bytes"},
		{"tools.timeout", c.Tools.Timeout <= 0 || c.Tools.Timeout > tool.MaxTimeout, "must be above 0 and at most 10m"},
		{"pools.size", c.Pools.Size < 0 || c.Pools.Size > 64, "must be 0 (off) to 64"},
		{"retries.max", c.Retries.Max < 0 || c.Retries.Max > 10, "must be 0 (none) to 10"},
		{"retries.backoff", c.Retries.Backoff <= 0 || c.Retries.Backoff > 10*time.Second, "must be above 0 and at most 10s"},
		{"events.stream_buffer", c.Events.StreamBuffer < 1 || c.Events.StreamBuffer > 65536, "must be 1 to 65536"},
		{"events.max_streams", c.Events.MaxStreams < 1 || c.Events.MaxStreams > 4096, "must be 1 to 4096"},
		{"events.max_streams_per_token", c.Events.MaxStreamsPerToken < 0, "must not be negative (0 = half of max_streams)"},
		{"events.admin_streams", c.Events.AdminStreams < 0, "must not be negative"},
		{"events.webhook_url", c.Events.WebhookURL != "" && webhook.CheckURL(c.Events.WebhookURL) != nil, "must be http(s)://host[:port]/path, without credentials"},
		{"events.webhook_secret_file", (c.Events.WebhookURL != "") != (c.Events.WebhookSecretFile != ""), "is needed with events.webhook_url, and only with it"},
		{"events.webhook_secret_file", c.Events.WebhookSecretFile != "" && !filepath.IsAbs(c.Events.WebhookSecretFile), "must be an absolute path"},
		positive("events.webhook_timeout", c.Events.WebhookTimeout <= 0),
		{"events.webhook_retries", c.Events.WebhookRetries < 0 || c.Events.WebhookRetries > 10, "must be 0 to 10"},
		{"events.webhook_queue", c.Events.WebhookQueue < 1 || c.Events.WebhookQueue > 1<<20, "must be 1 to 1048576"},
		{"pools.refill", c.Pools.Refill < 1 || c.Pools.Refill > 16, "must be 1 to 16"},
		positive("pools.max_idle_memory", c.Pools.MaxIdleMemory <= 0),
		positive("pools.max_age", c.Pools.MaxAge <= 0),
		{"pools.backends", hasBlankOrDup(c.Pools.Backends), "must not hold empty or repeated names"},
		{"pools.languages", !allIn(c.Pools.Languages, sandbox.Languages(true)...), "must hold " + strings.Join(sandbox.Languages(true), " or ") + ", each at most once"},
		{"server.listen", c.Server.Listen == "", "must not be empty"},
		positive("server.max_body", c.Server.MaxBody <= 0),
		{"server.max_runs", c.Server.MaxRuns < 0, "must not be negative (0 = by backend: the host's CPUs, a cluster's quota)"},
		{"server.queue_depth", c.Server.QueueDepth < 0, "must not be negative (0 = answer busy at once)"},
		{"server.queue_wait", c.Server.QueueWait < 0, "must not be negative (0 = answer busy at once)"},
		{"server.max_runs_per_token", c.Server.MaxRunsPerToken < 0, "must not be negative (0 = half of a lane's run slots)"},
		{"server.admin_runs", c.Server.AdminRuns < 0, "must not be negative"},
		positive("server.max_result_memory", c.Server.MaxResultMemory <= 0),
		{"server.max_result_memory", c.Server.MaxResultMemory > 0 && c.Server.MaxResultMemory < m.ResultBytes(), fmt.Sprintf(
			"%s cannot hold one run at the maxima: want at least 2 × max_limits.output + max_limits.artifact_bytes = %s",
			sandbox.FormatSize(c.Server.MaxResultMemory), sandbox.FormatSize(m.ResultBytes()))},
		positive("server.write_timeout", c.Server.WriteTimeout <= 0),
		{"server.min_body_rate", c.Server.MinBodyRate < 1 || c.Server.MinBodyRate > sandbox.GiB, "must be 1 to 1g (bytes per second)"},
		{"server.max_uploads", c.Server.MaxUploads < 1 || c.Server.MaxUploads > 4096, "must be 1 to 4096"},
		{"server.max_uploads_per_token", c.Server.MaxUploadsPerToken < 0, "must not be negative (0 = half of max_uploads)"},
		{"server.admin_uploads", c.Server.AdminUploads < 0, "must not be negative"},
		{"server.max_connections", c.Server.MaxConnections < 0, "must not be negative (0 = from the open-file limit)"},
		{"server.max_connections_per_address", c.Server.MaxConnectionsPerAddress < 0, "must not be negative (0 = a quarter of max_connections)"},
		{"server.max_connections_per_address", c.Server.MaxConnections > 0 && c.Server.MaxConnectionsPerAddress > c.Server.MaxConnections,
			fmt.Sprintf("%d is above server.max_connections (%d)", c.Server.MaxConnectionsPerAddress, c.Server.MaxConnections)},
		{"server.max_header_bytes", c.Server.MaxHeaderBytes < 4*sandbox.KiB || c.Server.MaxHeaderBytes > sandbox.MiB, "must be within 4k and 1m"},
		{"server.allowed_hosts", !allHosts(c.Server.AllowedHosts), `must hold host names without scheme, port or path (or "*")`},
		{"server.allowed_origins", !allOrigins(c.Server.AllowedOrigins), "must hold origins: http:// or https://, a host and an optional port, nothing more"},
		{"server.drain_delay", c.Server.DrainDelay < 0, "must not be negative"},
		positive("server.shutdown_timeout", c.Server.ShutdownTimeout <= 0),
		{"replicas.name", c.Replicas.Name != "" && !replica.ValidName(c.Replicas.Name), "must be a DNS label: lower-case letters, digits and dashes, at most 63"},
		{"replicas.name", c.Replicas.Name == "" && (len(c.Replicas.Peers) > 0 || c.Replicas.Pods != ""), "must be set when replicas.peers or replicas.pods is: session ids carry it"},
		{"replicas.pods", c.Replicas.Pods != "" && len(c.Replicas.Peers) > 0, "and replicas.peers are two ways to find replicas: set one"},
		{"replicas.peers", peersErr != nil, fmt.Sprint(peersErr)},
		{"replicas.port", c.Replicas.Port < 0 || c.Replicas.Port > 65535, "must be a port (0 = server.listen's)"},
		{"auth.tokens", slices.Contains(c.Auth.Tokens, ""), "must not hold empty entries"},
		{"auth.concurrency", c.Auth.Concurrency < 0, "must not be negative (0 = unlimited)"},
		{"auth.rate", c.Auth.Rate < 0, "must not be negative (0 = unlimited)"},
		{"auth.burst", c.Auth.Burst < 0, "must not be negative"},
		{"auth.failure_rate", c.Auth.FailureRate < 0, "must not be negative (0 = no bound)"},
		{"auth.failure_burst", c.Auth.FailureBurst < 0, "must not be negative"},
		{"audit.max_age", c.Audit.MaxAge < 0, "must not be negative"},
		{"audit.max_rows", c.Audit.MaxRows < 0, "must not be negative (0 = no bound)"},
		{"log.format", !slices.Contains([]string{"text", "json"}, c.Log.Format), fmt.Sprintf("%q is not text or json", c.Log.Format)},
		{"log.level", !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level), fmt.Sprintf("%q is not debug, info, warn or error", c.Log.Level)},
	}
	for _, r := range rules {
		if r.bad {
			return r.key, r.msg
		}
	}
	// Whatever else the contract demands of limits and maxima, and every
	// default within its maximum.
	if err := c.Limits().Validate(); err != nil {
		return "limits", err.Error()
	}
	if err := c.MaxLimit.Validate(); err != nil {
		return "max_limits", strings.Replace(err.Error(), "limits.", "max_limits.", 1)
	}
	if err := c.Limit.Within(c.MaxLimit); err != nil {
		// "limits.memory 3g exceeds the maximum 1g (max_limits.memory)"
		key, msg, _ := strings.Cut(err.Error(), " ")
		return key, msg
	}
	if err := c.Guard.Validate(); err != nil {
		return "guard", strings.TrimPrefix(err.Error(), "guard config: ")
	}
	return "", ""
}

// allAbs reports whether list holds absolute paths, each at most once.
func allAbs(list []string) bool {
	for _, p := range list {
		if !filepath.IsAbs(p) {
			return false
		}
	}
	return !hasBlankOrDup(list)
}

// allIn reports whether list holds only the names given, each at most once.
func allIn(list []string, names ...string) bool {
	for i, s := range list {
		if !slices.Contains(names, s) || slices.Contains(list[:i], s) {
			return false
		}
	}
	return true
}

// allHosts reports whether list holds host names (or "*").
func allHosts(list []string) bool {
	for _, h := range list {
		if h == "*" {
			continue
		}
		if h == "" || strings.ContainsAny(h, "/:@?# \t") {
			return false
		}
	}
	return true
}

// allOrigins reports whether list holds web origins: scheme://host[:port].
func allOrigins(list []string) bool {
	for _, o := range list {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" ||
			u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Scheme+"://"+u.Host != strings.TrimSuffix(o, "/") {
			return false
		}
	}
	return true
}

// checkBackends asks each backend section that can validate itself; its
// error names the key first ("docker.image: must not be empty").
func (c *Config) checkBackends() (key, msg string) {
	for _, name := range sandbox.Names() {
		v, ok := c.Backends[name].(interface{ Validate() error })
		if !ok {
			continue
		}
		if err := v.Validate(); err != nil {
			msg := err.Error()
			if k, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(k, name+".") {
				return k, rest
			}
			return name, msg
		}
	}
	return "", ""
}

func hasBlankOrDup(list []string) bool {
	seen := map[string]bool{}
	for _, s := range list {
		if s == "" || seen[s] {
			return true
		}
		seen[s] = true
	}
	return false
}

func allEnvNames(list []string) bool {
	for _, s := range list {
		if s == "" || strings.ContainsAny(s, "=\x00") {
			return false
		}
	}
	return true
}
