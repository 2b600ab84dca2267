package v1

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/sandbox"
)

func TestChunkerKeepsCharactersWhole(t *testing.T) {
	c := &Chunker{Type: EventStdout}
	var evs []*StreamEvent
	for _, p := range []string{"a\xc3", "\xa9", "\xe2\x82", "\xac!", "\xf0\x9f\x98", "\x80"} {
		if ev := c.Next([]byte(p)); ev != nil {
			evs = append(evs, ev)
		}
	}
	var got []string
	for _, ev := range evs {
		if ev.DataBase64 != nil || ev.Type != EventStdout {
			t.Fatalf("event %+v", ev)
		}
		got = append(got, ev.Data)
	}
	if strings.Join(got, "|") != "a|é|€!|😀" {
		t.Fatalf("events %q", got)
	}
	if c.Flush() != nil {
		t.Fatal("nothing should be held back")
	}
	// Bytes that are not UTF-8 go as base64; a dangling lead byte is
	// flushed at the end.
	if ev := c.Next([]byte("x\xffy")); ev.DataBase64 == nil || string(ev.Bytes()) != "x\xffy" {
		t.Fatalf("invalid bytes: %+v", ev)
	}
	if ev := c.Next([]byte("z\xe2")); ev.Data != "z" {
		t.Fatalf("%+v", ev)
	}
	if ev := c.Flush(); ev == nil || string(ev.DataBase64) != "\xe2" {
		t.Fatalf("flush: %+v", ev)
	}
	// The event round-trips through JSON.
	b, _ := json.Marshal(&StreamEvent{Type: EventStderr, DataBase64: []byte{0xff}})
	var ev StreamEvent
	if err := json.Unmarshal(b, &ev); err != nil || string(ev.Bytes()) != "\xff" {
		t.Fatalf("%s: %+v %v", b, ev, err)
	}
}

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
		{RunRequest{Command: []string{"a"}, Limits: sandbox.Limits{Pids: -1}}, sandbox.ErrInvalid, "limits"},
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

func TestProblem(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{sandbox.Errorf(sandbox.ErrBusy, "busy", "full"), 429, "busy"},
		{sandbox.Errorf(sandbox.ErrDenied, CodeUnauthenticated, "who?"), 401, CodeUnauthenticated},
		{sandbox.Errorf(sandbox.ErrLimit, function.CodeInputTooLarge, "big"), 413, function.CodeInputTooLarge},
		{errors.New("plain"), 500, "internal"},
	} {
		p := NewProblem(tc.err)
		if p.Status != tc.status || p.Code != tc.code || p.Type != ProblemTypePrefix+tc.code || p.Detail != tc.err.Error() {
			t.Errorf("%v: %+v", tc.err, p)
		}
	}
	// Back on the client side: the kind and code survive.
	for status, kind := range map[int]*sandbox.Kind{400: sandbox.ErrInvalid, 401: sandbox.ErrDenied, 403: sandbox.ErrDenied, 404: sandbox.ErrNotFound,
		405: sandbox.ErrInvalid, 413: sandbox.ErrLimit, 415: sandbox.ErrInvalid, 429: sandbox.ErrBusy, 500: sandbox.ErrInternal, 503: sandbox.ErrUnavailable} {
		p := ProblemFor(status, "some_code", "detail")
		if !errors.Is(p, kind) || sandbox.CodeOf(p) != "some_code" {
			t.Errorf("%d: kind %v, code %s", status, sandbox.KindOf(p), sandbox.CodeOf(p))
		}
	}
	// A function code's kind wins over the status.
	if p := ProblemFor(http.StatusInternalServerError, function.CodeBusy, "x"); !errors.Is(p, sandbox.ErrBusy) {
		t.Errorf("function code kind: %v", sandbox.KindOf(p))
	}
	if CodeOfType(ProblemTypePrefix+"busy") != "busy" || CodeOfType("about:blank") != "" {
		t.Error("CodeOfType")
	}
}

func TestAuditQuery(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	q := AuditQuery{Token: "ci", Operation: OpRun, ErrorCode: "busy", Since: since, Until: since.Add(time.Hour), Limit: 7}
	got, err := ParseAuditQuery(q.Values())
	if err != nil || got != q {
		t.Fatalf("%+v %v", got, err)
	}
	for _, tc := range []struct{ query, field string }{
		{"limit=1001", "limit"}, {"limit=-1", "limit"}, {"limit=x", "limit"},
		{"since=yesterday", "since"}, {"kind=job", "kind"}, {"colour=red", "colour"},
	} {
		v, _ := url.ParseQuery(tc.query)
		_, err := ParseAuditQuery(v)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("%s: %v", tc.query, err)
		}
	}
	for _, ok := range []string{"limit=0", "limit=1000", ""} {
		v, _ := url.ParseQuery(ok)
		if _, err := ParseAuditQuery(v); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
