package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// writeFile writes a config file into a fresh temp dir and returns its path.
func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "execbox.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// yamlFor writes key (a path like "limits.memory") with a YAML value.
func yamlFor(key, value string) string {
	section, name, nested := strings.Cut(key, ".")
	if !nested {
		return fmt.Sprintf("%s: %s\n", key, value)
	}
	return fmt.Sprintf("%s:\n  %s: %s\n", section, name, value)
}

// TestLayers checks, for a key of every syntax, that each layer overrides the
// one below and that the provenance names the layer that won.
func TestLayers(t *testing.T) {
	type layer struct {
		text string // in the file's syntax for file, else env/flag syntax
		want any
	}
	keys := []struct {
		key             string
		file, env, flag layer
		defaultWant     any
	}{
		{"backend", layer{"native", "native"}, layer{"bwrap", "bwrap"}, layer{"off", "off"}, "auto"},
		{"allow_unisolated", layer{"true", true}, layer{"false", false}, layer{"1", true}, false},
		{"preference", layer{"[docker]", []string{"docker"}}, layer{"bwrap, native", []string{"bwrap", "native"}}, layer{"gvisor", []string{"gvisor"}}, []string{"native", "bwrap", "docker"}},
		{"limits.memory", layer{"300m", int64(300 << 20)}, layer{"1g", int64(1 << 30)}, layer{"16MiB", int64(16 << 20)}, int64(256 << 20)},
		{"limits.wall", layer{"20s", 20 * time.Second}, layer{"30", 30 * time.Second}, layer{"1m", time.Minute}, 15 * time.Second},
		{"limits.cpus", layer{"1.5", 1.5}, layer{"2", 2.0}, layer{"0.25", 0.25}, 1.0},
		{"limits.pids", layer{"10", 10}, layer{"20", 20}, layer{"30", 30}, 64},
		{"docker.host", layer{"unix:///a.sock", "unix:///a.sock"}, layer{"tcp://b:2375", "tcp://b:2375"}, layer{"", ""}, ""},
		{"docker.idle_timeout", layer{"1m", time.Minute}, layer{"2m", 2 * time.Minute}, layer{"0", time.Duration(0)}, 5 * time.Minute},
	}
	stacks := []struct {
		name            string
		file, env, flag bool
		winner          Origin
	}{
		{"defaults", false, false, false, FromDefault},
		{"file", true, false, false, FromFile},
		{"env", false, true, false, FromEnv},
		{"flag", false, false, true, FromFlag},
		{"file<env", true, true, false, FromEnv},
		{"file<flag", true, false, true, FromFlag},
		{"env<flag", false, true, true, FromFlag},
		{"file<env<flag", true, true, true, FromFlag},
	}
	for _, k := range keys {
		for _, s := range stacks {
			t.Run(k.key+"/"+s.name, func(t *testing.T) {
				path, env, flags := "", []string{}, map[string]string{}
				if s.file {
					path = writeFile(t, "# a comment\n"+yamlFor(k.key, k.file.text))
				}
				f := table().byKey[k.key]
				if s.env {
					env = append(env, f.env+"="+k.env.text)
				}
				if s.flag {
					flags[k.key] = k.flag.text
				}
				c, p, err := Load(path, env, flags)
				if err != nil {
					t.Fatal(err)
				}
				want, src := k.defaultWant, Source{Origin: FromDefault}
				switch s.winner {
				case FromFile:
					want, src = k.file.want, Source{Origin: FromFile, File: path, Line: 2}
					if strings.Contains(k.key, ".") {
						src.Line = 3 // the key sits below its section
					}
				case FromEnv:
					want, src = k.env.want, Source{Origin: FromEnv, Env: f.env}
				case FromFlag:
					want, src = k.flag.want, Source{Origin: FromFlag}
				}
				if got := f.get(c); !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %#v, want %#v", k.key, got, want)
				}
				if got := p.Source(k.key); got != src {
					t.Errorf("source of %s = %+v, want %+v", k.key, got, src)
				}
				// Nothing else moved.
				for _, other := range table().fields {
					if other.key != k.key && p.Source(other.key).Origin != FromDefault {
						t.Errorf("source of %s = %v, want default", other.key, p.Source(other.key))
					}
				}
			})
		}
	}
}

func TestProvenanceLines(t *testing.T) {
	path := writeFile(t, `# execbox
backend: native

limits:
  wall: 10s
  memory: 512m   # more room
preference:
  - bwrap
  - native
docker:
`)
	c, p, err := Load(path, []string{"EXECBOX_LIMITS_PIDS=100"}, map[string]string{"log.level": "debug"})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"backend":       "file " + path + ":2",
		"limits.wall":   "file " + path + ":5",
		"limits.memory": "file " + path + ":6",
		"preference":    "file " + path + ":7",
		"limits.pids":   "env EXECBOX_LIMITS_PIDS",
		"log.level":     "flag",
		"limits.cpus":   "default",
		"docker.image":  "default", // an empty section sets nothing
	} {
		if got := p.Source(key).String(); got != want {
			t.Errorf("source of %s = %q, want %q", key, got, want)
		}
	}
	if p.File != path || p.FileFrom != "--config" {
		t.Errorf("file = %q from %q", p.File, p.FileFrom)
	}
	if c.Limit.Memory != 512<<20 || c.Limit.Pids != 100 || c.Log.Level != "debug" {
		t.Errorf("config = %+v", c)
	}
}

func TestConfigFileChoice(t *testing.T) {
	a := writeFile(t, "backend: native\n")
	b := writeFile(t, "backend: bwrap\n")
	missing := filepath.Join(t.TempDir(), "nope.yaml")

	c, p, err := Load("", []string{"EXECBOX_CONFIG=" + b}, nil)
	if err != nil || c.Backend != "bwrap" || p.FileFrom != "EXECBOX_CONFIG" {
		t.Fatalf("EXECBOX_CONFIG: %v, %+v, %v", c, p, err)
	}
	c, p, err = Load(a, []string{"EXECBOX_CONFIG=" + b}, nil)
	if err != nil || c.Backend != "native" || p.File != a || p.FileFrom != "--config" {
		t.Fatalf("--config over EXECBOX_CONFIG: %v, %+v, %v", c, p, err)
	}
	c, p, err = Load("", []string{"EXECBOX_CONFIG="}, nil)
	if err != nil || c.Backend != "auto" || p.File != "" {
		t.Fatalf("no file: %v, %+v, %v", c, p, err)
	}
	for name, load := range map[string]func() error{
		"--config":       func() error { _, _, err := Load(missing, nil, nil); return err },
		"EXECBOX_CONFIG": func() error { _, _, err := Load("", []string{"EXECBOX_CONFIG=" + missing}, nil); return err },
	} {
		err := load()
		if !errors.Is(err, sandbox.ErrNotFound) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s missing file: err = %v, want not found naming %s", name, err, missing)
		}
	}
	if _, _, err := Load(t.TempDir(), nil, nil); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("directory as config: err = %v, want invalid", err)
	}
}

func TestFileSize(t *testing.T) {
	pad := strings.Repeat("#", maxFileSize-len("backend: bwrap\n")-1) + "\n"
	if c, _, err := Load(writeFile(t, pad+"backend: bwrap\n"), nil, nil); err != nil || c.Backend != "bwrap" {
		t.Errorf("file of exactly %d bytes: %v", maxFileSize, err)
	}
	if _, _, err := Load(writeFile(t, pad+"backend: bwrap\n#"), nil, nil); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("file of %d bytes: err = %v, want too large", maxFileSize+1, err)
	}
}

func TestFileErrors(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string // substrings of the error after "PATH:"
	}{
		{"unknown key", "limits:\n  wall: 10s\n  memroy: 1g\n", []string{":3:", `unknown key "limits.memroy"`, `did you mean "limits.memory"?`}},
		{"unknown top key", "backend: auto\nbakend: off\n", []string{":2:", `unknown key "bakend"`, `did you mean "backend"?`}},
		{"unknown section", "limit:\n  wall: 1s\n", []string{":1:", `unknown key "limit"`, `did you mean "limits"?`}},
		{"far from any key", "zzzzzzzz: 1\n", []string{":1:", `unknown key "zzzzzzzz"`}},
		{"section key at top", "wall: 10s\n", []string{":1:", `unknown key "wall"`}},
		{"bad duration", "limits:\n  wall: 3x\n", []string{":2:", "limits.wall", `invalid duration "3x"`}},
		{"bad size", "limits:\n\n  memory: 12x\n", []string{":3:", "limits.memory", `invalid size "12x"`}},
		{"negative size", "server:\n  max_body: -1m\n", []string{":2:", "server.max_body", `invalid size "-1m"`}},
		{"bad bool", "allow_unisolated: yes\n", []string{":1:", "allow_unisolated", `invalid bool "yes"`}},
		{"bad int", "limits:\n  pids: 1.5\n", []string{":2:", "limits.pids", `"1.5"`}},
		{"bad float", "limits:\n  cpus: .nan\n", []string{":2:", "limits.cpus", `invalid number`}},
		{"null value", "backend:\n", []string{":1:", "backend: no value"}},
		{"list as scalar", "preference: native\n", []string{":1:", "preference: want a list"}},
		{"list of lists", "preference:\n  - [a]\n", []string{":2:", "want a list of strings"}},
		{"scalar as list", "backend: [a]\n", []string{":1:", "backend: want a single value"}},
		{"section as scalar", "limits: 5\n", []string{":1:", "limits: want a mapping"}},
		{"top as list", "- a\n", []string{":1:", "the top level: want a mapping"}},
		{"repeated key", "limits:\n  wall: 1s\n  wall: 2s\n", []string{":3:", `"limits.wall" is set again (first on line 2)`}},
		{"repeated section", "log:\n  level: info\nlog:\n  format: json\n", []string{":3:", `"log" is set again`}},
		{"two documents", "backend: auto\n---\nbackend: off\n", []string{"one YAML document"}},
		{"bad yaml", "backend: [\n", []string{"parsing"}},
		{"validation", "limits:\n  wall: 2m\n", []string{"limits.wall: 2m exceeds the maximum 1m (max_limits.wall)", "(set by file "}},
		{"moved key", "limits:\n  max_wall: 2m\n", []string{":2:", "limits.max_wall was replaced by max_limits.wall"}},
		{"no maximum for a flag", "max_limits:\n  output_limit_kill: true\n", []string{":2:", `unknown key "max_limits.output_limit_kill"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, c.text)
			_, _, err := Load(path, nil, nil)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, sandbox.ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			for _, w := range append(c.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestFileForms(t *testing.T) {
	// The forms a hand-written file uses that must work.
	path := writeFile(t, `
defaults: &lim
  wall: 5s
`[:0]+`
backend: "native"
run_as_user: 1000
limits:
  memory: 1073741824
  wall: 20
max_limits:
  wall: 1h30m
env_allowlist:      # every item commented out
native:
  rootfs: [/usr, /lib]
docker:             # nothing set
  # host: unix:///x
`)
	c, _, err := Load(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Backend != "native" || c.RunAsUser != "1000" || c.Limit.Memory != 1<<30 || c.Limit.Wall != 20*time.Second ||
		c.MaxLimit.Wall != 90*time.Minute || len(c.EnvAllowlist) != 0 || !reflect.DeepEqual(native(c).RootFS, []string{"/usr", "/lib"}) ||
		docker(c).Image != "execbox-python:latest" {
		t.Errorf("config = %+v", c)
	}
	for _, empty := range []string{"", "# only a comment\n", "---\n", "~\n"} {
		c, _, err := Load(writeFile(t, empty), nil, nil)
		if err != nil || !reflect.DeepEqual(c, Default()) {
			t.Errorf("file %q: %+v, %v; want the defaults", empty, c, err)
		}
	}
	// An alias is followed.
	c, _, err = Load(writeFile(t, "backend: &b bwrap\npreference: [*b]\n"), nil, nil)
	if err != nil || c.Preference[0] != "bwrap" {
		t.Errorf("alias: %v, %v", c, err)
	}
}

// TestEveryScriptVariableIsKnown: every EXECBOX_ variable the scripts, the
// deployment files, the docs and the clients' tests name is a key's or a
// known non-key (nonKeyEnv): exported for a script, it must not make every
// execbox the script starts refuse to start.
func TestEveryScriptVariableIsKnown(t *testing.T) {
	root := "../../.."
	out, err := exec.Command("git", "-C", root, "ls-files", "scripts", "deploy", ".ci", "clients", "docs", "README.md").Output()
	if err != nil {
		t.Skipf("no git checkout: %v", err)
	}
	name := regexp.MustCompile(`EXECBOX_[A-Z0-9_]*[A-Z0-9]`)
	seen := map[string]string{}
	for _, f := range strings.Fields(string(out)) {
		if strings.Contains(f, "node_modules/") || strings.HasSuffix(f, ".lock") || strings.HasSuffix(f, "package-lock.json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range name.FindAllString(string(b), -1) {
			seen[n] = f
		}
	}
	if len(seen) < 10 {
		t.Fatalf("only %d variables found: %v", len(seen), seen)
	}
	// Kubernetes' service links for a Service named execbox, which the
	// manifests turn off (enableServiceLinks) because execbox refuses them.
	for _, n := range []string{"EXECBOX_SERVICE_HOST", "EXECBOX_PORT"} {
		if _, _, err := Load("", []string{n + "=1"}, nil); sandbox.CodeOf(err) != "config_unknown_key" {
			t.Errorf("%s: %v, want refused", n, err)
		}
		delete(seen, n)
	}
	for n, f := range seen {
		if _, _, err := Load("", []string{n + "=1"}, nil); sandbox.CodeOf(err) == "config_unknown_key" {
			t.Errorf("%s (in %s): %v", n, f, err)
		}
	}
}

func TestEnv(t *testing.T) {
	env := []string{
		"PATH=/usr/bin",
		"EXECBOX_PREFERENCE= bwrap , docker,",
		"EXECBOX_ENV_ALLOWLIST=",
		"EXECBOX_ENV_ALLOWPREFIX=LC_,PIP_",
		"EXECBOX_NATIVE_ROOTFS=/usr,/lib64",
		"EXECBOX_DOCKER_HOST=unix:///run/docker.sock",
		"EXECBOX_ALLOW_UNISOLATED=true",
		"EXECBOX_LIMITS_MEMORY=1g",
		"EXECBOX_LIMITS_MEMORY=512m", // the last one wins
		"EXECBOX_TOKEN=secret",       // known, not a key
		"EXECBOX_REQUIRE=native",     // known, not a key
		"execbox_backend=off",        // no prefix
		"EXECBOX_BROKEN",             // no '='
	}
	c, p, err := Load("", env, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Preference, []string{"bwrap", "docker"}) || len(c.EnvAllowlist) != 0 || c.EnvAllowlist == nil ||
		!reflect.DeepEqual(c.EnvAllowPrefix, []string{"LC_", "PIP_"}) || !reflect.DeepEqual(native(c).RootFS, []string{"/usr", "/lib64"}) ||
		docker(c).Host != "unix:///run/docker.sock" || !c.AllowUnisolated || c.Limit.Memory != 512<<20 ||
		c.Limit.Pids != 64 || c.Backend != "auto" {
		t.Errorf("config = %+v", c)
	}
	// A variable that names no key is an error naming it, never matched
	// to the nearest key.
	for _, bad := range []string{"EXECBOX_LIMIT_PIDS=1", "EXECBOX_limits_pids=2", "EXECBOX_LIMITS_MEMROY=1g"} {
		_, _, err := Load("", append(env, bad), nil)
		name, _, _ := strings.Cut(bad, "=")
		if !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != "config_unknown_key" || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want config_unknown_key naming it", bad, err)
		}
	}
	if _, _, err := Load("", []string{"EXECBOX_LIMITS_MEMROY=1g"}, nil); !strings.Contains(fmt.Sprint(err), "did you mean EXECBOX_LIMITS_MEMORY?") {
		t.Errorf("no suggestion: %v", err)
	}
	if s := p.Source("env_allowlist"); s.Origin != FromEnv {
		t.Errorf("an empty variable still sets its key: source = %v", s)
	}
}

func TestBadValuesNameTheirSource(t *testing.T) {
	cases := []struct {
		env   []string
		flags map[string]string
		want  []string
	}{
		{env: []string{"EXECBOX_LIMITS_MEMORY=12x"}, want: []string{"EXECBOX_LIMITS_MEMORY", `invalid size "12x"`}},
		{env: []string{"EXECBOX_LIMITS_WALL=-1s"}, want: []string{"EXECBOX_LIMITS_WALL", "negative"}},
		{env: []string{"EXECBOX_LIMITS_WALL="}, want: []string{"EXECBOX_LIMITS_WALL", `invalid duration ""`}},
		{env: []string{"EXECBOX_ALLOW_UNISOLATED=yes"}, want: []string{"EXECBOX_ALLOW_UNISOLATED", `invalid bool`}},
		{env: []string{"EXECBOX_LIMITS_CPUS=Inf"}, want: []string{"EXECBOX_LIMITS_CPUS", `invalid number`}},
		{env: []string{"EXECBOX_LIMITS_CPUS=NaN"}, want: []string{"EXECBOX_LIMITS_CPUS", `invalid number`}},
		{env: []string{"EXECBOX_FUNCTIONS_CONCURRENCY=many"}, want: []string{"EXECBOX_FUNCTIONS_CONCURRENCY", `invalid whole number`}},
		{flags: map[string]string{"limits.wall": "abc"}, want: []string{"flag limits.wall", `invalid duration "abc"`}},
		{flags: map[string]string{"limits.memroy": "1g"}, want: []string{"flag limits.memroy", `unknown key (did you mean "limits.memory"?)`}},
		{env: []string{"EXECBOX_LIMITS_WALL=2m"}, want: []string{"limits.wall: 2m exceeds the maximum 1m (max_limits.wall) (set by env EXECBOX_LIMITS_WALL)"}},
		{env: []string{"EXECBOX_LIMITS_MAX_WALL=2m"}, want: []string{"env EXECBOX_LIMITS_MAX_WALL: limits.max_wall was replaced by max_limits.wall"}},
		{flags: map[string]string{"limits.max_wall": "2m"}, want: []string{"flag: limits.max_wall was replaced by max_limits.wall"}},
		{flags: map[string]string{"limits.memory": "3g"}, want: []string{"limits.memory: 3g exceeds the maximum"}},
		{flags: map[string]string{"backend": "local"}, want: []string{"backend: local", "allow_unisolated", "(set by flag)"}},
	}
	for _, c := range cases {
		_, _, err := Load("", c.env, c.flags)
		if !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("env %q flags %v: err = %v, want invalid", c.env, c.flags, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not contain %q", err, w)
			}
		}
	}
}

func TestSet(t *testing.T) {
	c := Default()
	if err := c.Set("limits.memory", "1.5g"); err != nil || c.Limit.Memory != 3<<29 {
		t.Errorf("Set: %v, memory = %d", err, c.Limit.Memory)
	}
	if err := c.Set("limits.memroy", "1g"); !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), `did you mean "limits.memory"`) {
		t.Errorf("unknown key: %v", err)
	}
	if err := c.Set("limits.memory", "-1m"); err == nil || !strings.Contains(err.Error(), "limits.memory") || c.Limit.Memory != 3<<29 {
		t.Errorf("bad value: %v (memory now %d)", err, c.Limit.Memory)
	}
}

func TestKeysAndEnvNames(t *testing.T) {
	if tb := table(); len(tb.byEnv) != len(tb.fields) || len(tb.byKey) != len(tb.fields) {
		t.Fatalf("%d fields, %d keys, %d env names: two keys share a name", len(tb.fields), len(tb.byKey), len(tb.byEnv))
	}
	for name := range nonKeyEnv {
		if _, clash := table().byEnv[name]; clash {
			t.Errorf("%s is both a key and a non-key variable", name)
		}
	}
	for _, s := range []string{"native", "docker", "gvisor", "bwrap"} {
		if !table().sections[s] {
			t.Errorf("backend section %s is not a section", s)
		}
	}
	if got := EnvName("limits.file_size"); got != "EXECBOX_LIMITS_FILE_SIZE" {
		t.Errorf("EnvName = %q", got)
	}
	if got := EnvName("nope"); got != "" {
		t.Errorf("EnvName(nope) = %q", got)
	}
	if got := len(Keys()); got != 123 {
		t.Errorf("%d keys, want the 123 of Config (limits and max_limits, image_store.max_bytes, the server's and auth's bounds and playground, the admission queue, uploads, sessions, replicas, pools, retries, events, guard and its approvals' shares, and docker.pool_size included)", got)
	}
}

// The guard's rules and budgets are lists of records: a YAML list in the
// file, the same in flow style in env and flags; a misspelt field is an
// error as a misspelt key is, and the guard's own checks run at load.
func TestGuardRecords(t *testing.T) {
	path := writeFile(t, `guard:
  rules:
    - name: no-local
      action: deny
      backends: [local]
    - name: ask-fetch
      action: confirm
      tools: [http_fetch]
  budgets:
    - {name: hourly, window: 1h, executions: 100, cpu: 10m}
  approvals:
    timeout: 2m
    max_pending_per_token: 4
    self_approve: true
`)
	c, p, err := Load(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := c.Guard
	if len(g.Rules) != 2 || g.Rules[0].Name != "no-local" || g.Rules[0].Backends[0] != "local" || g.Rules[1].Action != "confirm" ||
		len(g.Budgets) != 1 || g.Budgets[0].Window != time.Hour || g.Budgets[0].CPU != 10*time.Minute || g.Approvals.Timeout != 2*time.Minute ||
		g.Approvals.MaxPendingPerToken != 4 || !g.Approvals.SelfApprove || g.Approvals.AdminPending != 1 || g.Approvals.MaxPending != 64 {
		t.Fatalf("%+v", g)
	}
	if s := p.Source("guard.rules"); s.Line != 2 {
		t.Errorf("source %+v", s)
	}
	// What print writes, Set reads back.
	var again Config
	again = *Default()
	if err := again.Set("guard.rules", table().byKey["guard.rules"].format(c)); err != nil || len(again.Guard.Rules) != 2 || again.Guard.Rules[1].Tools[0] != "http_fetch" {
		t.Fatalf("round trip: %v %+v", err, again.Guard.Rules)
	}
	c, _, err = Load("", []string{`EXECBOX_GUARD_BUDGETS=[{name: b, window: 30s, executions: 2}]`}, nil)
	if err != nil || len(c.Guard.Budgets) != 1 || c.Guard.Budgets[0].Window != 30*time.Second {
		t.Fatalf("env: %v %+v", err, c.Guard.Budgets)
	}
	for text, want := range map[string]string{
		"guard:\n  rules:\n    - name: x\n      action: deny\n      backend: [local]\n": "field backend not found",
		"guard:\n  rules:\n    - name: x\n      action: maybe\n":                        `unknown action "maybe"`,
		"guard:\n  rules: {name: x}\n":                                                  "want a list",
		"guard:\n  budgets:\n    - name: b\n      window: 1h\n":                         "limits nothing",
		"guard:\n  approvals:\n    admin_pending: -1\n":                                 "approvals.admin_pending",
	} {
		_, _, err := Load(writeFile(t, text), nil, nil)
		if sandbox.CodeOf(err) != "config_invalid" || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want config_invalid with %q", text, err, want)
		}
	}
}
