package sandbox

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// The default allowlist, written out: a change to it is a change of the
// contract and shows up here.
func TestDefaultEnvAllowlist(t *testing.T) {
	want := []string{"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM"}
	if !slices.Equal(DefaultEnvAllowlist, want) {
		t.Fatalf("DefaultEnvAllowlist = %q, want %q", DefaultEnvAllowlist, want)
	}
}

// BuildEnv with literal expectations: which host variables pass, the order
// of the layers, and sorting.
func TestBuildEnv(t *testing.T) {
	host := []string{
		"PATH=/host/bin", "LANG=C.UTF-8", "LC_ALL=C", "LC_CTYPE=C", "TZ=UTC", "TERM=xterm",
		"HOME=/root", "USER=root", "SECRET=hunter2", "AWS_SECRET_ACCESS_KEY=k", "SSH_AUTH_SOCK=/run/ssh",
		"LC_TIME=de_DE", "PATHX=x", "noequals", "=empty", "APP_ONE=1", "APP_TWO=2", "APPLE=3", "LISTED=l",
	}
	cases := []struct {
		name   string
		pol    Policy
		fixed  map[string]string
		layers []map[string]string
		want   []string
	}{
		{
			name: "defaults only",
			want: []string{"LANG=C.UTF-8", "LC_ALL=C", "LC_CTYPE=C", "PATH=/host/bin", "TERM=xterm", "TZ=UTC"},
		},
		{
			name:  "fixed replaces host values",
			fixed: map[string]string{"HOME": "/work", "TMPDIR": "/tmp", "PATH": "/usr/bin:/bin"},
			want:  []string{"HOME=/work", "LANG=C.UTF-8", "LC_ALL=C", "LC_CTYPE=C", "PATH=/usr/bin:/bin", "TERM=xterm", "TMPDIR=/tmp", "TZ=UTC"},
		},
		{
			name: "policy allowlist and prefix",
			pol:  Policy{EnvAllowlist: []string{"LISTED", "ABSENT"}, EnvAllowPrefix: []string{"APP_", ""}},
			want: []string{"APP_ONE=1", "APP_TWO=2", "LANG=C.UTF-8", "LC_ALL=C", "LC_CTYPE=C", "LISTED=l", "PATH=/host/bin", "TERM=xterm", "TZ=UTC"},
		},
		{
			name:   "layers in order, later wins",
			fixed:  map[string]string{"HOME": "/work", "PATH": "/usr/bin"},
			layers: []map[string]string{{"A": "spec", "B": "spec", "PATH": "/spec"}, {"B": "process", "C": "process"}},
			want:   []string{"A=spec", "B=process", "C=process", "HOME=/work", "LANG=C.UTF-8", "LC_ALL=C", "LC_CTYPE=C", "PATH=/spec", "TERM=xterm", "TZ=UTC"},
		},
		{
			name:   "a layer may set what the host may not pass",
			layers: []map[string]string{{"SECRET": "chosen", "EMPTY": ""}},
			want:   []string{"EMPTY=", "LANG=C.UTF-8", "LC_ALL=C", "LC_CTYPE=C", "PATH=/host/bin", "SECRET=chosen", "TERM=xterm", "TZ=UTC"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := BuildEnv(host, c.pol, c.fixed, c.layers...)
			if !slices.Equal(got, c.want) {
				t.Fatalf("BuildEnv =\n  %q\nwant\n  %q", got, c.want)
			}
		})
	}
	if got := BuildEnv(nil, Policy{}, nil); len(got) != 0 {
		t.Fatalf("BuildEnv of nothing = %q, want empty", got)
	}
}

func TestCheckEnv(t *testing.T) {
	if err := CheckEnv(map[string]string{"A": "1", "B_2": "", "lower": "x=y"}); err != nil {
		t.Fatalf("valid env: %v", err)
	}
	for _, c := range []struct {
		env  map[string]string
		code string
		msg  string
	}{
		{map[string]string{"": "x"}, "env_invalid", `environment variable name "" is not valid`},
		{map[string]string{"A=B": "x"}, "env_invalid", `environment variable name "A=B" is not valid`},
		{map[string]string{"A\x00": "x"}, "env_invalid", `environment variable name "A\x00" is not valid`},
		{map[string]string{"A": "x\x00y"}, "env_invalid", `environment variable A contains a NUL byte`},
		{map[string]string{"BIG": strings.Repeat("x", 128<<10)}, "env_too_large", `environment variables exceed 128 KiB`},
	} {
		err := CheckEnv(c.env)
		if !errors.Is(err, ErrInvalid) || CodeOf(err) != c.code || err == nil || err.Error() != c.msg {
			t.Errorf("CheckEnv(%.40q) = %v (code %q), want ErrInvalid %s %q", c.env, err, CodeOf(err), c.code, c.msg)
		}
	}
}
