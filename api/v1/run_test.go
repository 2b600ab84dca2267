package v1

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// TestRunRequestLimits: a request's limits are the contract's Limits in
// their JSON form; a bad value is a type error naming the field.
func TestRunRequestLimits(t *testing.T) {
	var r RunRequest
	err := json.Unmarshal([]byte(`{"command":["x"],"limits":{"memory":"1.5g","output":1024,"wall":"1500ms","cpu_time":2.5}}`), &r)
	if err != nil {
		t.Fatal(err)
	}
	l := r.Limits
	if l.Memory != 1536*sandbox.MiB || l.Output != 1024 || l.Wall != 1500*time.Millisecond || l.CPUTime != 2500*time.Millisecond {
		t.Fatalf("%+v", l)
	}
	b, _ := json.Marshal(&r)
	if string(b) != `{"command":["x"],"limits":{"wall":1.5,"cpu_time":2.5,"memory":1610612736,"output":1024}}` {
		t.Fatalf("encoded %s", b)
	}
	if b, _ := json.Marshal(&RunRequest{Code: "x"}); string(b) != `{"code":"x"}` {
		t.Fatalf("zero limits are left out: %s", b)
	}
	for _, bad := range []string{`{"memory":"lots"}`, `{"memory":1.5}`, `{"memory":true}`, `{"wall":"soon"}`, `{"wall":1e7}`, `{"wall":[]}`} {
		var r RunRequest
		err := json.Unmarshal([]byte(`{"limits":`+bad+`}`), &r)
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) || !strings.HasPrefix(te.Field, "limits.memory") && !strings.HasPrefix(te.Field, "limits.wall") {
			t.Errorf("%s: %v, want a type error naming the field", bad, err)
		}
	}
}

func TestBuild(t *testing.T) {
	pol := sandbox.Policy{EnvAllowlist: []string{"X"}}
	spec, p, err := (&RunRequest{Code: "print(1)", Files: map[string][]byte{"a.txt": []byte("a")}, Stdin: "in", Dir: "sub"}).Build(pol)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := io.ReadAll(p.Stdin)
	if strings.Join(p.Args, " ") != "python3 -B main.py" || string(spec.Files["main.py"]) != "print(1)" || string(spec.Files["a.txt"]) != "a" ||
		string(in) != "in" || p.Dir != "sub" || spec.Policy.EnvAllowlist[0] != "X" {
		t.Fatalf("%+v %+v", spec, p)
	}
	_, p, err = (&RunRequest{Command: []string{"cat"}, StdinBase64: []byte{0, 1}}).Build(pol)
	if in, _ := io.ReadAll(p.Stdin); err != nil || string(in) != "\x00\x01" {
		t.Fatalf("%v %q", err, in)
	}
	for _, tc := range []struct {
		req   RunRequest
		kind  *sandbox.Kind
		field string
	}{
		{RunRequest{}, sandbox.ErrInvalid, "command"},
		{RunRequest{Command: []string{""}}, sandbox.ErrInvalid, "command[0]"},
		{RunRequest{Command: []string{"a", strings.Repeat("x", MaxArgLen+1)}}, sandbox.ErrInvalid, "command[1]"},
		{RunRequest{Command: make([]string, MaxCommandArgs+1)}, sandbox.ErrInvalid, "command"},
		{RunRequest{Code: "x", Files: map[string][]byte{"main.py": nil}}, sandbox.ErrInvalid, "files"},
		{RunRequest{Code: "x", Language: "sh", Files: map[string][]byte{"main.sh": nil}}, sandbox.ErrInvalid, "files"},
		{RunRequest{Command: []string{"a"}, Files: map[string][]byte{"/etc/x": nil}}, sandbox.ErrInvalid, "files"},
		{RunRequest{Command: []string{"a"}, Network: "host"}, sandbox.ErrDenied, "network"},
		{RunRequest{Command: []string{"a"}, Network: "bridge"}, sandbox.ErrInvalid, "network"},
		{RunRequest{Command: []string{"a"}, Env: map[string]string{"": "x"}}, sandbox.ErrInvalid, "env"},
		{RunRequest{Command: []string{"a"}, Dir: "../up"}, sandbox.ErrInvalid, ""},
	} {
		_, _, err := tc.req.Build(pol)
		var fe *FieldError
		field := ""
		if errors.As(err, &fe) {
			field = fe.Field
		}
		if !errors.Is(err, tc.kind) || field != tc.field {
			t.Errorf("%+v: %v (field %q), want %v naming %q", tc.req, err, field, tc.kind.Code(), tc.field)
		}
	}
	// At the argument bounds: accepted.
	if _, _, err := (&RunRequest{Command: append([]string{strings.Repeat("x", MaxArgLen)}, make([]string, MaxCommandArgs-1)...)}).Build(pol); err != nil {
		t.Fatalf("at the bounds: %v", err)
	}
}

// The per-call constraints: image and scope are names within their
// bounds (both sides), tmp_exec relaxes only /tmp's noexec.
func TestBuildConstraints(t *testing.T) {
	spec, _, err := (&RunRequest{Command: []string{"x"}, Image: "registry:5000/py:3.12@sha256-x", Scope: strings.Repeat("s", 64), TmpExec: true}).Build(sandbox.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Image != "registry:5000/py:3.12@sha256-x" || spec.Scope != strings.Repeat("s", 64) || !spec.Policy.TmpExec {
		t.Fatalf("%+v", spec)
	}
	if spec, _, _ := (&RunRequest{Command: []string{"x"}}).Build(sandbox.Policy{}); spec.Policy.TmpExec || spec.Image != "" || spec.Scope != "" {
		t.Fatalf("defaults: %+v", spec)
	}
	for _, r := range []RunRequest{
		{Command: []string{"x"}, Image: strings.Repeat("i", 256)},
		{Command: []string{"x"}, Image: "py thon"},
		{Command: []string{"x"}, Scope: strings.Repeat("s", 65)},
		{Command: []string{"x"}, Scope: "a/b"},
	} {
		var fe *FieldError
		if _, _, err := r.Build(sandbox.Policy{}); !errors.As(err, &fe) || fe.Field != "image" && fe.Field != "scope" {
			t.Errorf("%q %q: %v, want a field error", r.Image, r.Scope, err)
		}
	}
}
