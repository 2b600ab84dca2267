package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/backend/bwrap"
	dockerbe "github.com/execbox/execbox/backend/docker"
	"github.com/execbox/execbox/backend/gvisor"
	nativebe "github.com/execbox/execbox/backend/native"
	"github.com/execbox/execbox/sandbox"
)

func TestDefaults(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if got := c.Limits(); got != sandbox.Defaults {
		t.Errorf("Limits() = %+v, want sandbox.Defaults %+v", got, sandbox.Defaults)
	}
	// Every limit has a maximum, sized to this host (issue 22), and the
	// result memory holds a run at the maxima.
	if c.MaxLimit != sandbox.HostMaxima() || c.Server.MaxResultMemory != DefaultResultMemory(sandbox.HostMemory()) ||
		c.Server.MaxResultMemory < c.MaxLimit.ResultBytes() {
		t.Errorf("maxima %+v, result memory %d", c.MaxLimit, c.Server.MaxResultMemory)
	}
	if DefaultResultMemory(1<<40) != 4<<30 || DefaultResultMemory(1<<30) != 256<<20 || DefaultResultMemory(8<<30) != 1<<30 {
		t.Errorf("DefaultResultMemory is not an eighth of memory within 256m–4g")
	}
	// The sessions' file memory (issue 33): half of this host's, holding
	// a session at the maxima; on a tiny host the maxima's floor.
	if m := c.Sessions.MaxFileMemory; m != sandbox.HostSessionMemory() || m > sandbox.HostMemory() || m < c.MaxLimit.WorkSize+c.MaxLimit.TmpSize {
		t.Errorf("sessions.max_file_memory %d: want half of the host's %d, at least %d", m, sandbox.HostMemory(), c.MaxLimit.WorkSize+c.MaxLimit.TmpSize)
	}
	if got := sandbox.SessionMemoryFor(24 << 30); got != 12<<30 {
		t.Errorf("SessionMemoryFor(24g) = %d, want 12g", got)
	}
	if got := sandbox.SessionMemoryFor(128 << 20); got != sandbox.Defaults.WorkSize+sandbox.Defaults.TmpSize {
		t.Errorf("SessionMemoryFor(128m) = %d, want the default work_size + tmp_size", got)
	}
	// Load with nothing is the defaults.
	l, p, err := Load("", nil, nil)
	if err != nil || p.File != "" {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := Print(&a, l, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := Print(&b, c, nil, false); err != nil || a.String() != b.String() {
		t.Errorf("Load with no layers differs from Default:\n%s\n%s", &a, &b)
	}
	// Each call gets its own lists.
	c.Preference[0] = "changed"
	if Default().Preference[0] != "native" {
		t.Error("Default shares its lists")
	}
}

func TestLimitsConversion(t *testing.T) {
	c := Default()
	for key, val := range map[string]string{
		"limits.wall": "3s", "max_limits.wall": "1m", "limits.memory": "100m", "limits.cpus": "0.5", "limits.pids": "7",
		"limits.nofile": "99", "limits.file_size": "1", "limits.tmp_size": "2", "limits.work_size": "3", "limits.output": "4",
		"limits.output_limit_kill": "true", "limits.artifact_files": "5", "limits.artifact_bytes": "6", "limits.cpu_time": "9s",
	} {
		if err := c.Set(key, val); err != nil {
			t.Fatal(err)
		}
	}
	want := sandbox.Limits{
		Wall: 3 * time.Second, CPUTime: 9 * time.Second, Memory: 100 << 20, CPUs: 0.5, Pids: 7, NoFile: 99,
		FileSize: 1, TmpSize: 2, WorkSize: 3, Output: 4, OutputLimitKill: true, ArtifactFiles: 5, ArtifactBytes: 6,
	}
	if got := c.Limits(); got != want || c.MaxLimit.Wall != time.Minute {
		t.Errorf("Limits() = %+v (max wall %v), want %+v", got, c.MaxLimit.Wall, want)
	}
}

// TestValidate checks each rule on both sides of its bound.
func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		key    string // "" = valid
		modify func(c *Config)
	}{
		{"backend set", "", func(c *Config) { c.Backend = "anything" }},
		{"backend empty", "backend", func(c *Config) { c.Backend = "" }},
		{"local allowed", "", func(c *Config) { c.Backend, c.AllowUnisolated = "local", true }},
		{"local not allowed", "backend", func(c *Config) { c.Backend = "local" }},
		{"preference empty list", "", func(c *Config) { c.Preference = nil }},
		{"preference blank", "preference", func(c *Config) { c.Preference = []string{"native", ""} }},
		{"preference repeated", "preference", func(c *Config) { c.Preference = []string{"native", "native"} }},
		{"pools off", "", func(c *Config) { c.Pools.Size = 0 }},
		{"pools 64", "", func(c *Config) { c.Pools.Size = 64 }},
		{"pools 65", "pools.size", func(c *Config) { c.Pools.Size = 65 }},
		{"pools negative", "pools.size", func(c *Config) { c.Pools.Size = -1 }},
		{"pools refill 16", "", func(c *Config) { c.Pools.Refill = 16 }},
		{"pools refill 17", "pools.refill", func(c *Config) { c.Pools.Refill = 17 }},
		{"pools refill 0", "pools.refill", func(c *Config) { c.Pools.Refill = 0 }},
		{"pools memory 0", "pools.max_idle_memory", func(c *Config) { c.Pools.MaxIdleMemory = 0 }},
		{"pools max_age 0", "pools.max_age", func(c *Config) { c.Pools.MaxAge = 0 }},
		{"pools python only", "", func(c *Config) { c.Pools.Languages = []string{"python"} }},
		{"pools no languages", "", func(c *Config) { c.Pools.Languages = nil }},
		{"pools ruby", "pools.languages", func(c *Config) { c.Pools.Languages = []string{"ruby"} }},
		{"pools python twice", "pools.languages", func(c *Config) { c.Pools.Languages = []string{"python", "python"} }},
		{"pools backend blank", "pools.backends", func(c *Config) { c.Pools.Backends = []string{""} }},
		{"wall = max wall", "", func(c *Config) { c.Limit.Wall = c.MaxLimit.Wall }},
		{"wall > max wall", "limits.wall", func(c *Config) { c.Limit.Wall = c.MaxLimit.Wall + time.Nanosecond }},
		{"wall 1ns", "", func(c *Config) { c.Limit.Wall = time.Nanosecond }},
		{"wall 0", "limits.wall", func(c *Config) { c.Limit.Wall = 0 }},
		{"max wall 0", "max_limits.wall", func(c *Config) { c.MaxLimit.Wall = 0 }},
		{"memory = max", "", func(c *Config) { c.Limit.Memory = c.MaxLimit.Memory }},
		{"memory > max", "limits.memory", func(c *Config) { c.Limit.Memory = c.MaxLimit.Memory + 1 }},
		{"output > max", "limits.output", func(c *Config) { c.Limit.Output = c.MaxLimit.Output + 1 }},
		{"max memory below 4m", "max_limits.memory", func(c *Config) { c.MaxLimit.Memory = 4<<20 - 1 }},
		{"max pids absurd", "max_limits", func(c *Config) { c.MaxLimit.Pids = 1 << 31 }},
		{"max output 0", "max_limits.output", func(c *Config) { c.MaxLimit.Output = 0 }},
		{"max artifact_files 0", "max_limits.artifact_files", func(c *Config) { c.MaxLimit.ArtifactFiles = 0 }},
		{"memory 4m", "", func(c *Config) { c.Limit.Memory = 4 << 20 }},
		{"memory below 4m", "limits.memory", func(c *Config) { c.Limit.Memory = 4<<20 - 1 }},
		{"memory negative", "limits.memory", func(c *Config) { c.Limit.Memory = -1 }},
		{"cpus tiny", "", func(c *Config) { c.Limit.CPUs = 0.01 }},
		{"cpus 0", "limits.cpus", func(c *Config) { c.Limit.CPUs = 0 }},
		{"pids 1", "", func(c *Config) { c.Limit.Pids = 1 }},
		{"pids 0", "limits.pids", func(c *Config) { c.Limit.Pids = 0 }},
		{"pids negative", "limits.pids", func(c *Config) { c.Limit.Pids = -1 }},
		{"nofile 0", "limits.nofile", func(c *Config) { c.Limit.NoFile = 0 }},
		{"file_size 1", "", func(c *Config) { c.Limit.FileSize = 1 }},
		{"file_size 0", "limits.file_size", func(c *Config) { c.Limit.FileSize = 0 }},
		{"tmp_size 0", "limits.tmp_size", func(c *Config) { c.Limit.TmpSize = 0 }},
		{"work_size 0", "limits.work_size", func(c *Config) { c.Limit.WorkSize = 0 }},
		{"output 1", "", func(c *Config) { c.Limit.Output = 1 }},
		{"output 0", "limits.output", func(c *Config) { c.Limit.Output = 0 }},
		{"artifact_files 0", "limits.artifact_files", func(c *Config) { c.Limit.ArtifactFiles = 0 }},
		{"artifact_bytes 0", "limits.artifact_bytes", func(c *Config) { c.Limit.ArtifactBytes = 0 }},
		{"env names", "", func(c *Config) { c.EnvAllowlist, c.EnvAllowPrefix = []string{"LANG"}, []string{"LC_"} }},
		{"env name with =", "env_allowlist", func(c *Config) { c.EnvAllowlist = []string{"A=B"} }},
		{"env prefix empty", "env_allowprefix", func(c *Config) { c.EnvAllowPrefix = []string{""} }},
		{"work_root absolute", "", func(c *Config) { c.WorkRoot = "/srv/execbox" }},
		{"work_root relative", "work_root", func(c *Config) { c.WorkRoot = "work" }},
		{"state_dir relative", "state_dir", func(c *Config) { c.StateDir = "./state" }},
		{"concurrency 0", "", func(c *Config) { c.Functions.Concurrency = 0 }},
		{"concurrency negative", "functions.concurrency", func(c *Config) { c.Functions.Concurrency = -1 }},
		{"queue_timeout negative", "functions.queue_timeout", func(c *Config) { c.Functions.QueueTimeout = -1 }},
		{"fn timeout = max wall", "", func(c *Config) { c.Functions.Timeout = c.MaxLimit.Wall }},
		{"fn timeout > max wall", "functions.timeout", func(c *Config) { c.Functions.Timeout = c.MaxLimit.Wall + 1 }},
		{"fn timeout 0", "functions.timeout", func(c *Config) { c.Functions.Timeout = 0 }},
		{"rootfs absolute", "", func(c *Config) { native(c).RootFS = []string{"/usr"} }},
		{"rootfs relative", "native.rootfs", func(c *Config) { native(c).RootFS = []string{"usr"} }},
		{"docker image empty", "docker.image", func(c *Config) { docker(c).Image = "" }},
		{"idle_timeout 0", "", func(c *Config) { docker(c).IdleTimeout = 0 }},
		{"idle_timeout negative", "docker.idle_timeout", func(c *Config) { docker(c).IdleTimeout = -1 }},
		{"runsc empty", "gvisor.runsc", func(c *Config) { gvisorCfg(c).Runsc = "" }},
		{"bwrap empty", "bwrap.path", func(c *Config) { bwrapCfg(c).Path = "" }},
		{"listen empty", "server.listen", func(c *Config) { c.Server.Listen = "" }},
		{"max_body 1", "", func(c *Config) { c.Server.MaxBody = 1 }},
		{"max_body 0", "server.max_body", func(c *Config) { c.Server.MaxBody = 0 }},
		{"max_age negative", "audit.max_age", func(c *Config) { c.Audit.MaxAge = -1 }},
		{"max_runs 0", "", func(c *Config) { c.Server.MaxRuns = 0 }},
		{"max_runs negative", "server.max_runs", func(c *Config) { c.Server.MaxRuns = -1 }},
		{"admin_runs below max_runs", "", func(c *Config) { c.Server.MaxRuns, c.Server.AdminRuns = 4, 3 }},
		{"admin_runs = max_runs (kept to max_runs − 1)", "", func(c *Config) { c.Server.MaxRuns, c.Server.AdminRuns = 1, 1 }},
		{"admin_runs negative", "server.admin_runs", func(c *Config) { c.Server.AdminRuns = -1 }},
		{"max_runs_per_token negative", "server.max_runs_per_token", func(c *Config) { c.Server.MaxRunsPerToken = -1 }},
		{"result memory holds one run", "", func(c *Config) { c.Server.MaxResultMemory = c.MaxLimit.ResultBytes() }},
		{"result memory below one run", "server.max_result_memory", func(c *Config) { c.Server.MaxResultMemory = c.MaxLimit.ResultBytes() - 1 }},
		{"session file memory all of the host's", "", func(c *Config) { c.Sessions.MaxFileMemory = sandbox.HostMemory() }},
		{"session file memory beyond the host's", "sessions.max_file_memory", func(c *Config) { c.Sessions.MaxFileMemory = sandbox.HostMemory() + 1 }},
		{"session file memory holds one session", "", func(c *Config) { c.Sessions.MaxFileMemory = c.MaxLimit.WorkSize + c.MaxLimit.TmpSize }},
		{"session file memory below one session", "sessions.max_file_memory", func(c *Config) {
			c.Sessions.MaxFileMemory = c.MaxLimit.WorkSize + c.MaxLimit.TmpSize - 1
		}},
		{"session file memory 0", "sessions.max_file_memory", func(c *Config) { c.Sessions.MaxFileMemory = 0 }},
		{"write_timeout 0", "server.write_timeout", func(c *Config) { c.Server.WriteTimeout = 0 }},
		{"min_body_rate 1", "", func(c *Config) { c.Server.MinBodyRate = 1 }},
		{"min_body_rate 0", "server.min_body_rate", func(c *Config) { c.Server.MinBodyRate = 0 }},
		{"min_body_rate 1g", "", func(c *Config) { c.Server.MinBodyRate = 1 << 30 }},
		{"min_body_rate over 1g", "server.min_body_rate", func(c *Config) { c.Server.MinBodyRate = 1<<30 + 1 }},
		{"max_uploads 1", "", func(c *Config) { c.Server.MaxUploads = 1 }},
		{"max_uploads 0", "server.max_uploads", func(c *Config) { c.Server.MaxUploads = 0 }},
		{"max_uploads 4096", "", func(c *Config) { c.Server.MaxUploads = 4096 }},
		{"max_uploads 4097", "server.max_uploads", func(c *Config) { c.Server.MaxUploads = 4097 }},
		{"max_uploads_per_token 0", "", func(c *Config) { c.Server.MaxUploadsPerToken = 0 }},
		{"max_uploads_per_token negative", "server.max_uploads_per_token", func(c *Config) { c.Server.MaxUploadsPerToken = -1 }},
		{"admin_uploads 0", "", func(c *Config) { c.Server.AdminUploads = 0 }},
		{"admin_uploads negative", "server.admin_uploads", func(c *Config) { c.Server.AdminUploads = -1 }},
		{"max_streams_per_token 0", "", func(c *Config) { c.Events.MaxStreamsPerToken = 0 }},
		{"max_streams_per_token negative", "events.max_streams_per_token", func(c *Config) { c.Events.MaxStreamsPerToken = -1 }},
		{"admin_streams 0", "", func(c *Config) { c.Events.AdminStreams = 0 }},
		{"admin_streams negative", "events.admin_streams", func(c *Config) { c.Events.AdminStreams = -1 }},
		{"max_connections negative", "server.max_connections", func(c *Config) { c.Server.MaxConnections = -1 }},
		{"per address above max", "server.max_connections_per_address", func(c *Config) { c.Server.MaxConnections, c.Server.MaxConnectionsPerAddress = 10, 11 }},
		{"header bytes 1m", "", func(c *Config) { c.Server.MaxHeaderBytes = 1 << 20 }},
		{"header bytes over 1m", "server.max_header_bytes", func(c *Config) { c.Server.MaxHeaderBytes = 1<<20 + 1 }},
		{"allowed hosts", "", func(c *Config) { c.Server.AllowedHosts = []string{"execbox.internal", "*"} }},
		{"allowed host with port", "server.allowed_hosts", func(c *Config) { c.Server.AllowedHosts = []string{"execbox.internal:8080"} }},
		{"allowed host URL", "server.allowed_hosts", func(c *Config) { c.Server.AllowedHosts = []string{"http://x"} }},
		{"allowed origins", "", func(c *Config) {
			c.Server.AllowedOrigins = []string{"https://app.example.com", "http://localhost:3000"}
		}},
		{"allowed origin with path", "server.allowed_origins", func(c *Config) { c.Server.AllowedOrigins = []string{"https://app.example.com/x"} }},
		{"allowed origin *", "server.allowed_origins", func(c *Config) { c.Server.AllowedOrigins = []string{"*"} }},
		{"replica named", "", func(c *Config) { c.Replicas.Name = "execbox-7d9f8c6b5-x2x4z" }},
		{"replica name with a dot", "replicas.name", func(c *Config) { c.Replicas.Name = "a.b" }},
		{"replica name upper-case", "replicas.name", func(c *Config) { c.Replicas.Name = "A" }},
		{"peers", "", func(c *Config) { c.Replicas.Name, c.Replicas.Peers = "a", []string{"b=http://10.0.0.2:8080"} }},
		{"peers without a name", "replicas.name", func(c *Config) { c.Replicas.Peers = []string{"b=http://10.0.0.2:8080"} }},
		{"peer without a URL", "replicas.peers", func(c *Config) { c.Replicas.Name, c.Replicas.Peers = "a", []string{"b"} }},
		{"peer URL with a path", "replicas.peers", func(c *Config) { c.Replicas.Name, c.Replicas.Peers = "a", []string{"b=http://x:1/v1"} }},
		{"pods", "", func(c *Config) { c.Replicas.Name, c.Replicas.Pods = "a", "app=execbox" }},
		{"pods without a name", "replicas.name", func(c *Config) { c.Replicas.Pods = "app=execbox" }},
		{"pods and peers", "replicas.pods", func(c *Config) {
			c.Replicas.Name, c.Replicas.Pods, c.Replicas.Peers = "a", "app=execbox", []string{"b=http://x:1"}
		}},
		{"replicas port 65535", "", func(c *Config) { c.Replicas.Port = 65535 }},
		{"replicas port 65536", "replicas.port", func(c *Config) { c.Replicas.Port = 65536 }},
		{"failure_rate negative", "auth.failure_rate", func(c *Config) { c.Auth.FailureRate = -1 }},
		{"drain_delay 0", "", func(c *Config) { c.Server.DrainDelay = 0 }},
		{"drain_delay negative", "server.drain_delay", func(c *Config) { c.Server.DrainDelay = -1 }},
		{"shutdown_timeout 1ns", "", func(c *Config) { c.Server.ShutdownTimeout = 1 }},
		{"shutdown_timeout 0", "server.shutdown_timeout", func(c *Config) { c.Server.ShutdownTimeout = 0 }},
		{"token entry", "", func(c *Config) { c.Auth.Tokens = []string{"ci:ab"} }},
		{"token empty", "auth.tokens", func(c *Config) { c.Auth.Tokens = []string{""} }},
		{"auth concurrency 0", "", func(c *Config) { c.Auth.Concurrency = 0 }},
		{"auth concurrency negative", "auth.concurrency", func(c *Config) { c.Auth.Concurrency = -1 }},
		{"auth rate 0.5", "", func(c *Config) { c.Auth.Rate = 0.5 }},
		{"auth rate negative", "auth.rate", func(c *Config) { c.Auth.Rate = -0.5 }},
		{"auth burst 0", "", func(c *Config) { c.Auth.Burst = 0 }},
		{"auth burst negative", "auth.burst", func(c *Config) { c.Auth.Burst = -1 }},
		{"max_rows 0", "", func(c *Config) { c.Audit.MaxRows = 0 }},
		{"max_rows negative", "audit.max_rows", func(c *Config) { c.Audit.MaxRows = -1 }},
		{"log json", "", func(c *Config) { c.Log.Format = "json" }},
		{"log xml", "log.format", func(c *Config) { c.Log.Format = "xml" }},
		{"log warn", "", func(c *Config) { c.Log.Level = "warn" }},
		{"log loud", "log.level", func(c *Config) { c.Log.Level = "loud" }},
	}
	for _, tc := range cases {
		c := Default()
		tc.modify(c)
		err := c.Validate()
		switch {
		case tc.key == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.name, err)
		case tc.key != "" && (!errors.Is(err, sandbox.ErrInvalid) || !strings.HasPrefix(err.Error(), tc.key+": ")):
			t.Errorf("%s: err = %v, want ErrInvalid naming %s", tc.name, err, tc.key)
		}
	}
}

// The backends' sections, as their registrations made them.
func native(c *Config) *nativebe.Config  { return c.BackendConfig("native").(*nativebe.Config) }
func docker(c *Config) *dockerbe.Config  { return c.BackendConfig("docker").(*dockerbe.Config) }
func gvisorCfg(c *Config) *gvisor.Config { return c.BackendConfig("gvisor").(*gvisor.Config) }
func bwrapCfg(c *Config) *bwrap.Config   { return c.BackendConfig("bwrap").(*bwrap.Config) }

// TestBackendSections: every layer reaches a backend's own config type,
// found through its registration; each Load gets its own values.
func TestBackendSections(t *testing.T) {
	c, p, err := Load(writeFile(t, "docker:\n  image: py:3\n  reuse_container: true\n"),
		[]string{"EXECBOX_DOCKER_IDLE_TIMEOUT=90s"}, map[string]string{"docker.host": "unix:///d.sock", "native.rootfs": "/usr,/lib"})
	if err != nil {
		t.Fatal(err)
	}
	d := docker(c)
	if d.Host != "unix:///d.sock" || d.Image != "py:3" || d.Runtime != "" || !d.ReuseContainer || d.IdleTimeout != 90*time.Second {
		t.Errorf("docker section = %+v", d)
	}
	if got := native(c).RootFS; len(got) != 2 || got[1] != "/lib" {
		t.Errorf("native.rootfs = %v", got)
	}
	if bwrapCfg(c).Path != "bwrap" || gvisorCfg(c).Runsc != "runsc" {
		t.Errorf("defaults: bwrap %+v gvisor %+v", bwrapCfg(c), gvisorCfg(c))
	}
	if s := p.Source("docker.idle_timeout"); s.Origin != FromEnv {
		t.Errorf("docker.idle_timeout source = %v", s)
	}
	if c.BackendConfig("local") != nil {
		t.Error("local has no section, but BackendConfig returned one")
	}
	if other := Default(); docker(other).Image != "execbox-python:latest" {
		t.Errorf("a later Default shares the loaded section: image %q", docker(other).Image)
	}
	for _, k := range []string{"docker.host", "docker.image", "docker.runtime", "docker.reuse_container", "docker.idle_timeout",
		"native.rootfs", "native.tmp_exec", "native.init_path", "gvisor.runsc", "bwrap.path"} {
		if !slices.Contains(Keys(), k) {
			t.Errorf("key %s is missing from Keys()", k)
		}
	}
	if _, _, err := Load("", nil, map[string]string{"docker.nope": "x"}); !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "docker.nope") {
		t.Errorf("unknown key of a backend section: %v", err)
	}
}

func TestPrint(t *testing.T) {
	path := writeFile(t, "limits:\n  memory: 512m\n")
	c, p, err := Load(path, []string{"EXECBOX_DOCKER_HOST=tcp://h:2375"}, map[string]string{"limits.cpus": "0.5"})
	if err != nil {
		t.Fatal(err)
	}

	var text bytes.Buffer
	if err := Print(&text, c, p, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(text.String()), "\n")
	if len(lines) != 2+len(table().fields) {
		t.Errorf("text has %d lines, want a note, a header and %d keys:\n%s", len(lines), len(table().fields), &text)
	}
	for _, want := range [][]string{
		{"# config file: " + path + " (from --config)"},
		{"KEY", "VALUE", "SOURCE"},
		{"limits.memory", "512m", "file " + path + ":2"},
		{"limits.cpus", "0.5", "flag"},
		{"docker.host", "tcp://h:2375", "env EXECBOX_DOCKER_HOST"},
		{"preference", "[native, bwrap, docker]", "default"},
		{"run_as_user", `""`, "default"},
		{"audit.max_age", "720h", "default"},
	} {
		if !hasLine(lines, want) {
			t.Errorf("no line with %q in:\n%s", want, &text)
		}
	}

	var js bytes.Buffer
	if err := Print(&js, c, p, true); err != nil {
		t.Fatal(err)
	}
	var out struct {
		File     string `json:"file"`
		FileFrom string `json:"file_from"`
		Keys     []struct {
			Key    string          `json:"key"`
			Value  json.RawMessage `json:"value"`
			Source Source          `json:"source"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(js.Bytes(), &out); err != nil {
		t.Fatalf("JSON print is not valid JSON: %v\n%s", err, &js)
	}
	if out.File != path || out.FileFrom != "--config" || len(out.Keys) != len(table().fields) {
		t.Errorf("JSON = %+v", out)
	}
	got := map[string]string{}
	for _, k := range out.Keys {
		got[k.Key] = string(k.Value) + " " + k.Source.String()
	}
	for key, want := range map[string]string{
		"limits.memory":    "536870912 file " + path + ":2",
		"limits.cpus":      "0.5 flag",
		"limits.wall":      `"15s" default`,
		"docker.host":      `"tcp://h:2375" env EXECBOX_DOCKER_HOST`,
		"env_allowlist":    "[] default",
		"allow_unisolated": "false default",
		"limits.pids":      "64 default",
	} {
		if got[key] != want {
			t.Errorf("JSON %s = %s, want %s", key, got[key], want)
		}
	}

	// Without a file or provenance, and with nil lists, still valid.
	js.Reset()
	d := Default()
	d.Preference = nil
	if err := Print(&js, d, nil, true); err != nil || !json.Valid(js.Bytes()) || strings.Contains(js.String(), "null") {
		t.Errorf("print of defaults: %v\n%s", err, &js)
	}
}

func hasLine(lines []string, words []string) bool {
	for _, l := range lines {
		if strings.Join(strings.Fields(l), " ") == strings.Join(words, " ") ||
			len(words) == 1 && strings.HasPrefix(l, words[0]) {
			return true
		}
	}
	return false
}

func TestDirs(t *testing.T) {
	c := Default()
	c.WorkRoot, c.StateDir = "/w", "/s"
	if w, s, err := c.Dirs(); err != nil || w != "/w" || s != "/s" {
		t.Errorf("Dirs = %q, %q, %v", w, s, err)
	}
	t.Setenv("XDG_STATE_HOME", "/xdg")
	t.Setenv("TMPDIR", "/tmpdir")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	// Never a shared directory another user could plant first (issue 22):
	// /run/execbox as root, the user's runtime dir otherwise.
	w, s, err := Default().Dirs()
	wantRoot := "/run/user/1000/execbox"
	if os.Geteuid() == 0 {
		wantRoot = "/run/execbox"
	}
	if err != nil || w != wantRoot {
		t.Errorf("work root = %q, %v, want %q", w, err, wantRoot)
	}
	want := "/xdg/execbox"
	if os.Geteuid() == 0 {
		want = "/var/lib/execbox"
	}
	if s != want {
		t.Errorf("state dir = %q, want %q", s, want)
	}
}
