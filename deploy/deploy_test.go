package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "github.com/execbox/execbox/backend/all" // every backend's section
	"github.com/execbox/execbox/internal/daemon/config"
	"github.com/execbox/execbox/sandbox"
)

// packaged are the keys execbox.yaml sets, with the values the packaging
// chose; every other key is at its default.
var packaged = map[string]string{
	"work_root":               "/run/execbox/work",
	"state_dir":               "/var/lib/execbox",
	"audit.path":              "/var/lib/execbox/audit.db",
	"server.drain_delay":      "5s",
	"server.shutdown_timeout": "30s",
	"server.listen":           "127.0.0.1:8080",
	"backend":                 "auto",
}

// load reads a configuration file with no environment and no flags.
func load(t *testing.T, path string) (*config.Config, *config.Provenance) {
	t.Helper()
	c, p, err := config.Load(path, nil, nil)
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	return c, p
}

// values maps every key to its text form.
func values(c *config.Config, p *config.Provenance) map[string]config.Entry {
	m := map[string]config.Entry{}
	for _, e := range config.Entries(c, p) {
		m[e.Key] = e
	}
	return m
}

func TestConfigSetsWhatPackagingDecides(t *testing.T) {
	c, p := load(t, "execbox.yaml")
	got := values(c, p)
	def := values(config.Default(), nil)
	for key, e := range got {
		want, set := packaged[key]
		if !set {
			want = def[key].Text
		}
		if e.Text != want {
			t.Errorf("%s = %s, want %s", key, e.Text, want)
		}
		if fromFile := e.Source.Origin == config.FromFile; fromFile != set {
			t.Errorf("%s: set in the file: %v, want %v (only %v are set)", key, fromFile, set, keys(packaged))
		}
	}
	for key := range packaged {
		if _, ok := got[key]; !ok {
			t.Errorf("packaged key %s is no configuration key", key)
		}
	}
}

// hostSized reports whether key's built-in default is derived from the
// host's memory and CPUs, so the file can only show an example of it.
func hostSized(key string) bool {
	return strings.HasPrefix(key, "max_limits.") || key == "server.max_result_memory" || key == "sessions.max_file_memory"
}

// commentedKey is a key left at its default: "#key: value", indented as
// the key would be.
var commentedKey = regexp.MustCompile(`(?m)^(\s*)#([a-z_]+:.*)$`)

func TestConfigListsEveryKeyWithItsDefault(t *testing.T) {
	data, err := os.ReadFile("execbox.yaml")
	if err != nil {
		t.Fatal(err)
	}
	all := commentedKey.ReplaceAll(data, []byte("$1$2"))
	path := filepath.Join(t.TempDir(), "uncommented.yaml")
	if err := os.WriteFile(path, all, 0o644); err != nil {
		t.Fatal(err)
	}
	c, p := load(t, path) // unknown or repeated keys fail here
	got := values(c, p)
	def := values(config.Default(), nil)
	for _, key := range config.Keys() {
		e := got[key]
		if e.Source.Origin != config.FromFile {
			t.Errorf("execbox.yaml does not list %s (add \"#%s: %s\" to its section)", key, lastPart(key), def[key].Text)
			continue
		}
		if _, set := packaged[key]; set {
			continue
		}
		if hostSized(key) {
			continue // listed with this build machine's value; yours differs
		}
		if e.Text != def[key].Text {
			t.Errorf("execbox.yaml line %d shows %s: %s, but the default is %s", e.Source.Line, key, e.Text, def[key].Text)
		}
	}
}

// unit returns the unit's [Service] settings, a key's values in order.
func unit(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile("execbox.service")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			m[k] = append(m[k], v)
		}
	}
	return m
}

func TestUnitMatchesConfig(t *testing.T) {
	u := unit(t)
	c, _ := load(t, "execbox.yaml")
	one := func(key string) string {
		t.Helper()
		if len(u[key]) != 1 {
			t.Fatalf("the unit sets %s %d times, want once", key, len(u[key]))
		}
		return u[key][0]
	}
	// deploy.sh rewrites this exact prefix to its own binary.
	if got, want := one("ExecStart"), "/usr/bin/execbox serve --config /etc/execbox/execbox.yaml"; got != want {
		t.Errorf("ExecStart=%s, want %s", got, want)
	}
	if got := one("StateDirectory"); "/var/lib/"+got != c.StateDir {
		t.Errorf("StateDirectory=%s but state_dir is %s", got, c.StateDir)
	}
	if got := one("RuntimeDirectory"); !strings.HasPrefix(c.WorkRoot, "/run/"+got+"/") {
		t.Errorf("RuntimeDirectory=%s does not hold work_root %s", got, c.WorkRoot)
	}
	if got := one("ConfigurationDirectory"); got != "execbox" {
		t.Errorf("ConfigurationDirectory=%s, want execbox", got)
	}
	stop, err := sandbox.ParseDuration(one("TimeoutStopSec"))
	if err != nil {
		t.Fatalf("TimeoutStopSec: %v", err)
	}
	// The drain, the shutdown timeout and then the sandboxes' cleanup.
	if need := c.Server.DrainDelay + c.Server.ShutdownTimeout + 10*time.Second; stop < need {
		t.Errorf("TimeoutStopSec=%v, want at least %v (drain_delay + shutdown_timeout + 10s)", stop, need)
	}
	for key, want := range map[string]string{"KillMode": "mixed", "KillSignal": "SIGTERM", "Restart": "on-failure", "Delegate": "yes"} {
		if got := one(key); got != want {
			t.Errorf("%s=%s, want %s", key, got, want)
		}
	}
	// Each breaks a backend (see the unit's comments and scripts/test-release.sh).
	for _, key := range []string{"ProtectHostname", "ProtectControlGroups", "ProcSubset", "RestrictNamespaces",
		"SystemCallFilter", "MemoryDenyWriteExecute", "User", "Group", "UMask"} {
		if v, set := u[key]; set {
			t.Errorf("the unit sets %s=%s, which breaks a backend", key, v)
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func lastPart(key string) string { return key[strings.LastIndex(key, ".")+1:] }
