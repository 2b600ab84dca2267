package v1

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// TestSessionExecBuild: a session exec's shape, each bound on both sides.
func TestSessionExecBuild(t *testing.T) {
	long := strings.Repeat("x", MaxArgLen)
	for _, c := range []struct {
		name  string
		req   SessionExec
		field string // "" when valid
		args  []string
	}{
		{"command", SessionExec{Command: []string{"ls", "-l"}}, "", []string{"ls", "-l"}},
		{"code is python by default", SessionExec{Code: "print(1)"}, "", []string{"python3", "-B", "-c", "print(1)"}},
		{"javascript", SessionExec{Code: "1", Language: "javascript"}, "", []string{"node", "-e", "1"}},
		{"code at the bound", SessionExec{Code: long}, "", []string{"python3", "-B", "-c", long}},
		{"code over the bound", SessionExec{Code: long + "x"}, "code", nil},
		{"both", SessionExec{Command: []string{"ls"}, Code: "1"}, "command", nil},
		{"neither", SessionExec{}, "command", nil},
		{"language with a command", SessionExec{Command: []string{"ls"}, Language: "python"}, "language", nil},
		{"unknown language", SessionExec{Code: "1", Language: "cobol"}, "language", nil},
		{"empty program", SessionExec{Command: []string{""}}, "command[0]", nil},
		{"stdin twice", SessionExec{Command: []string{"cat"}, Stdin: "a", StdinBase64: []byte("b")}, "stdin", nil},
		{"negative timeout", SessionExec{Command: []string{"ls"}, Timeout: -1}, "timeout", nil},
		{"bad env", SessionExec{Command: []string{"ls"}, Env: map[string]string{"A=B": "c"}}, "env", nil},
	} {
		p, err := c.req.Build()
		if c.field == "" {
			if err != nil || !slices.Equal(p.Args, c.args) {
				t.Errorf("%s: %v, %v", c.name, p, err)
			}
			continue
		}
		fe, ok := err.(*FieldError)
		if !ok || fe.Field != c.field {
			t.Errorf("%s: %v, want a field error on %s", c.name, err, c.field)
		}
	}
	p, err := (&SessionExec{Command: []string{"cat"}, Stdin: "in", Timeout: Seconds(time.Second), Dir: "d"}).Build()
	if err != nil || p.Stdin == nil || p.Timeout != time.Second || p.Dir != "d" {
		t.Errorf("stdin, timeout, dir: %+v, %v", p, err)
	}
}

// TestSessionRequestBuild: a session's request is checked as a run's.
func TestSessionRequestBuild(t *testing.T) {
	for _, c := range []struct {
		name  string
		req   SessionRequest
		field string
	}{
		{"empty", SessionRequest{}, ""},
		{"bad file path", SessionRequest{Files: map[string][]byte{"../x": nil}}, "files"},
		{"negative ttl", SessionRequest{TTL: -1}, "ttl"},
		{"negative idle", SessionRequest{IdleTimeout: -1}, "idle_timeout"},
	} {
		_, err := c.req.Build(sandbox.Policy{})
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		fe, ok := err.(*FieldError)
		if !ok || fe.Field != c.field {
			t.Errorf("%s: %v, want a field error on %s", c.name, err, c.field)
		}
	}
}
