package sandboxtest

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/execbox/execbox/sandbox"
)

// envProc runs /usr/bin/env directly (not through sh, which adds PWD,
// SHLVL and _ of its own).
func envProc() *sandbox.Process {
	return &sandbox.Process{Args: []string{"/usr/bin/env"}}
}

// parseEnv turns env's output into a map; lines without '=' (continuations
// of multi-line values) are ignored.
func parseEnv(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

func (s *suite) testEnv(t *testing.T) {
	s.run(t, "host_secret_hidden", func(t *testing.T) {
		name, value := "EXECBOX_SUITE_SECRET_"+strings.ToUpper(token()), "secret-"+token()
		t.Setenv(name, value)
		res := s.oneShot(t, s.spec(nil), envProc())
		wantExit(t, res, 0)
		if _, ok := parseEnv(res.Stdout)[name]; ok || strings.Contains(res.Stdout, value) {
			t.Fatalf("host variable %s leaked into the sandbox:\n%s", name, res.Stdout)
		}
		if !strings.Contains(res.Stdout, "HOME=") {
			t.Fatalf("env printed no HOME; is /usr/bin/env running? output:\n%s", res.Stdout)
		}
	})

	s.run(t, "only_allowlisted_names", func(t *testing.T) {
		set := map[string]string{"EXECBOX_SUITE_SET": "1"}
		spec := s.spec(func(sp *sandbox.Spec) { sp.Env = merge(sp.Env, set) })
		res := s.oneShot(t, spec, envProc())
		wantExit(t, res, 0)
		// Written out, not taken from sandbox.DefaultEnvAllowlist: a change
		// of the contract must show up here. HOME and TMPDIR are the
		// backend's own.
		allowed := []string{"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "HOME", "TMPDIR"}
		allowed = append(allowed, slices.Collect(maps.Keys(spec.Env))...)
		allowed = append(allowed, spec.Policy.EnvAllowlist...)
		for k := range parseEnv(res.Stdout) {
			if slices.Contains(allowed, k) || hasAnyPrefix(k, spec.Policy.EnvAllowPrefix) {
				continue
			}
			t.Errorf("variable %s reached the program but is not on the allowlist %v", k, allowed)
		}
	})

	s.run(t, "default_allowlist", func(t *testing.T) {
		// The host's values of the default allowlist reach the program
		// (PATH aside: every backend sets a PATH of its own).
		want := map[string]string{
			"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "LC_CTYPE": "C.UTF-8",
			"TZ": "Etc/UTC", "TERM": "execbox-suite-" + token(),
		}
		for k, v := range want {
			t.Setenv(k, v)
		}
		res := s.oneShot(t, s.spec(nil), envProc())
		wantExit(t, res, 0)
		env := parseEnv(res.Stdout)
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if got, ok := env[k]; !ok || got != want[k] {
				t.Errorf("host variable %s=%q (on the default allowlist) reached the program as %q (set: %v)", k, want[k], got, ok)
			}
		}
	})

	s.run(t, "spec_and_process_env", func(t *testing.T) {
		spec := s.spec(func(sp *sandbox.Spec) {
			sp.Env = merge(sp.Env, map[string]string{
				"EXECBOX_SUITE_SPEC": "from spec", "EXECBOX_SUITE_BOTH": "spec",
			})
		})
		p := envProc()
		p.Env = map[string]string{"EXECBOX_SUITE_PROC": "from process", "EXECBOX_SUITE_BOTH": "process"}
		res := s.oneShot(t, spec, p)
		wantExit(t, res, 0)
		env := parseEnv(res.Stdout)
		for k, want := range map[string]string{
			"EXECBOX_SUITE_SPEC": "from spec", "EXECBOX_SUITE_PROC": "from process", "EXECBOX_SUITE_BOTH": "process",
		} {
			if got, ok := env[k]; !ok || got != want {
				t.Errorf("%s = %q (set: %v), want %q", k, got, ok, want)
			}
		}
	})

	s.run(t, "home_tmpdir_private", func(t *testing.T) {
		name := "execbox-suite-probe-" + token()
		res := s.oneShot(t, s.spec(nil), sh(`set -e
case "$HOME" in /*) ;; *) echo "HOME not absolute: '$HOME'"; exit 2;; esac
case "$TMPDIR" in /*) ;; *) echo "TMPDIR not absolute: '$TMPDIR'"; exit 2;; esac
test -d "$HOME" && test -d "$TMPDIR"
echo home > "$HOME/`+name+`"
echo tmp > "$TMPDIR/`+name+`"
cat "$HOME/`+name+`" "$TMPDIR/`+name+`"`))
		wantExit(t, res, 0)
		if res.Stdout != "home\ntmp\n" {
			t.Fatalf("writing into HOME and TMPDIR: %s", describe(res))
		}
		// The files must not have landed in the host's own home or temp dir.
		hostDirs := []string{os.TempDir(), "/tmp", "/var/tmp", "/root"}
		if h, err := os.UserHomeDir(); err == nil {
			hostDirs = append(hostDirs, h)
		}
		for _, d := range hostDirs {
			if _, err := os.Lstat(filepath.Join(d, name)); err == nil {
				os.Remove(filepath.Join(d, name))
				t.Errorf("a file written to the sandbox's HOME or TMPDIR appeared in the host's %s", d)
			}
		}
	})

	s.run(t, "policy_allowlist", func(t *testing.T) {
		tok := strings.ToUpper(token())
		listed, prefixed, other := "EXECBOX_SUITE_LISTED_"+tok, "EXECBOX_SUITE_PFX_"+tok+"_A", "EXECBOX_SUITE_PFXNOT_"+tok
		t.Setenv(listed, "listed-value")
		t.Setenv(prefixed, "prefixed-value")
		t.Setenv(other, "other-value")
		spec := s.spec(func(sp *sandbox.Spec) {
			sp.Policy.EnvAllowlist = append(slices.Clone(sp.Policy.EnvAllowlist), listed)
			sp.Policy.EnvAllowPrefix = append(slices.Clone(sp.Policy.EnvAllowPrefix), "EXECBOX_SUITE_PFX_"+tok+"_")
		})
		res := s.oneShot(t, spec, envProc())
		wantExit(t, res, 0)
		env := parseEnv(res.Stdout)
		if env[listed] != "listed-value" {
			t.Errorf("Policy.EnvAllowlist: %s missing or wrong (%q)", listed, env[listed])
		}
		if env[prefixed] != "prefixed-value" {
			t.Errorf("Policy.EnvAllowPrefix: %s missing or wrong (%q)", prefixed, env[prefixed])
		}
		if _, ok := env[other]; ok {
			t.Errorf("%s is not allowlisted but reached the program", other)
		}
	})
}

func merge(base, add map[string]string) map[string]string {
	m := maps.Clone(base)
	if m == nil {
		m = map[string]string{}
	}
	maps.Copy(m, add)
	return m
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if p != "" && strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
