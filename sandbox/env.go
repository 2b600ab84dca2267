package sandbox

import (
	"slices"
	"strings"
)

// DefaultEnvAllowlist names the host variables that reach a sandboxed
// program when the policy adds none. HOME and TMPDIR are always set by the
// backend to paths inside the sandbox.
var DefaultEnvAllowlist = []string{"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM"}

// MaxEnvBytes bounds the variables one request may set.
const MaxEnvBytes = 128 * KiB

// CheckEnv validates caller-set variables: a name is non-empty and has no
// '=' or NUL, a value has no NUL, and all of them fit in MaxEnvBytes.
func CheckEnv(env map[string]string) error {
	total := 0
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return Errorf(ErrInvalid, "env_invalid", "environment variable name %q is not valid", k)
		}
		if hasNUL(v) {
			return Errorf(ErrInvalid, "env_invalid", "environment variable %s contains a NUL byte", k)
		}
		total += len(k) + len(v) + 2
	}
	if total > MaxEnvBytes {
		return Errorf(ErrInvalid, "env_too_large", "environment variables exceed %d KiB", MaxEnvBytes/KiB)
	}
	return nil
}

// BuildEnv returns a sandboxed process's environment, sorted: the host
// variables allowed by DefaultEnvAllowlist and pol (from host, in KEY=VALUE
// form), then fixed (set by the backend: HOME, TMPDIR, a PATH of its own),
// then each layer in order (Spec.Env, Process.Env), later ones winning.
// Nothing else of the host's environment gets through.
func BuildEnv(host []string, pol Policy, fixed map[string]string, layers ...map[string]string) []string {
	m := map[string]string{}
	for _, kv := range host {
		k, v, ok := strings.Cut(kv, "=")
		if ok && allowed(k, pol) {
			m[k] = v
		}
	}
	for _, layer := range append([]map[string]string{fixed}, layers...) {
		for k, v := range layer {
			m[k] = v
		}
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

func allowed(k string, pol Policy) bool {
	if slices.Contains(DefaultEnvAllowlist, k) || slices.Contains(pol.EnvAllowlist, k) {
		return true
	}
	for _, p := range pol.EnvAllowPrefix {
		if p != "" && strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
