package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/sandbox"
)

// encodings are the ways a value reaches the wire: json.Marshal (the
// client) and an encoder that leaves HTML characters alone (the server's
// writeJSON).
var encodings = map[string]func(v any) ([]byte, error){
	"Marshal": json.Marshal,
	"Encoder": func(v any) ([]byte, error) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		err := enc.Encode(v)
		return buf.Bytes(), err
	},
}

// sameJSON fails unless the wire value encodes to exactly the bytes of the
// value it mirrors, in every encoding; it returns the Encoder's bytes.
func sameJSON(t *testing.T, name string, mirrored, wire any) []byte {
	t.Helper()
	var out []byte
	for _, how := range []string{"Marshal", "Encoder"} {
		enc := encodings[how]
		want, err := enc(mirrored)
		if err != nil {
			t.Fatalf("%s: %s: %v", name, how, err)
		}
		got, err := enc(wire)
		if err != nil {
			t.Fatalf("%s: %s of the wire type: %v", name, how, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %s:\nwire   %s\nbefore %s", name, how, got, want)
		}
		out = want
	}
	return out
}

// allSet fails when a field of the struct v points to is zero, so that a
// field added to a mirrored type without its wire twin cannot pass
// sameJSON unnoticed.
func allSet(t *testing.T, name string, v any) {
	t.Helper()
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		if rv.Type().Field(i).Tag.Get("json") == "-" {
			continue // not on the wire
		}
		if rv.Field(i).IsZero() {
			t.Errorf("%s: the sample leaves %s zero; set every field", name, rv.Type().Field(i).Name)
		}
	}
}

// html is text an escaping encoder changes.
const html = "if a < b && c > d: <script>"

func TestFunctionRequestWireJSON(t *testing.T) {
	full := &function.Request{
		Code: "def main(x):\n    " + html + "\n", Params: json.RawMessage(`{"x":"<&>"}`), Entrypoint: "main",
		Mode: function.ModeLint, Language: function.JavaScript, Timeout: function.Duration(2500 * time.Millisecond),
		Backend: "native", Tier: "strict", MinIsolation: "kernel",
	}
	allSet(t, "function.Request", full)
	for name, r := range map[string]*function.Request{
		"full":    full,
		"minimal": {Code: "def main(): pass"},
		"params":  {Code: "x", Params: json.RawMessage(`{}`), Timeout: function.Duration(time.Second)},
	} {
		b := sameJSON(t, name, r, FunctionRequest(r))
		// The wire type reads back what it wrote, and what the protocol reads.
		var back v1.FunctionRequest
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(&back, FunctionRequest(r)) {
			t.Errorf("%s: round trip %+v != %+v", name, back, *FunctionRequest(r))
		}
	}
	// The text forms the protocol accepts.
	var r v1.FunctionRequest
	if err := json.Unmarshal([]byte(`{"code":"x","timeout":"1500ms"}`), &r); err != nil || r.Timeout != 1500*time.Millisecond {
		t.Errorf("timeout text: %+v %v", r, err)
	}
	if err := json.Unmarshal([]byte(`{"code":"x","colour":1}`), &r); err == nil {
		t.Error("an unknown field is accepted")
	}
	if err := json.Unmarshal([]byte(`{"code":"x","timeout":"soon"}`), &r); err == nil {
		t.Error("a bad timeout is accepted")
	}
}

func TestFunctionResponseWireJSON(t *testing.T) {
	full := &function.Response{
		OK: true, Data: json.RawMessage(`{"a":"<b>"}`), Error: html, Code: function.CodeUserError, Type: "ValueError",
		Traceback: "Traceback <&>", Stdout: html, StdoutTruncated: true, DurationMS: 31, Backend: "native", Isolation: "process",
		Diagnostics: []function.Diagnostic{{Line: 1, Column: 2, EndLine: 3, EndColumn: 4, Message: "expected ':' <here>", Type: "error"}},
	}
	allSet(t, "function.Response", full)
	allSet(t, "function.Diagnostic", &full.Diagnostics[0])
	for name, r := range map[string]*function.Response{
		"full":           full,
		"failed":         {Code: function.CodeTimeout, Error: "execution timed out"},
		"no diagnostics": {OK: true, Diagnostics: []function.Diagnostic{}, Data: json.RawMessage(`[]`)},
		"data null":      {OK: true, Data: json.RawMessage(`null`)},
	} {
		w := FunctionResponse(r)
		sameJSON(t, name, r, w)
		if back := FunctionResponseOf(w); !reflect.DeepEqual(back, r) {
			t.Errorf("%s: back from the wire %+v != %+v", name, back, r)
		}
		if (w.Err() == nil) != (r.Err() == nil) || w.Err() != nil && w.Err().Error() != r.Err().Error() {
			t.Errorf("%s: Err %v, the protocol's %v", name, w.Err(), r.Err())
		}
	}
	// Every code keeps its kind on the wire.
	for _, code := range function.Codes() {
		r := &function.Response{Code: code, Error: "x"}
		if got, want := FunctionResponse(r).Err(), r.Err(); function.KindOf(code) != sandbox.KindOf(got) || sandbox.KindOf(got) != sandbox.KindOf(want) {
			t.Errorf("%s: kind %v, want %v", code, got, want)
		}
	}
}

// TestRanCodes: the codes answered 200 with ok false are function codes,
// those of a call whose code ran.
func TestRanCodes(t *testing.T) {
	ran := map[string]bool{
		function.CodeUserError: true, function.CodeSyntaxError: true, function.CodeEntrypointNotFound: true,
		function.CodeResultInvalid: true, function.CodeResultTooLarge: true, function.CodeTimeout: true,
		function.CodeMemoryLimit: true, function.CodeOutputInvalid: true, function.CodeResponseInvalid: true,
	}
	for _, code := range function.Codes() {
		if v1.Ran(code) != ran[code] {
			t.Errorf("v1.Ran(%s) = %v", code, v1.Ran(code))
		}
	}
	if v1.Ran("exited") || v1.Ran("") {
		t.Error("v1.Ran of a code that is no function code")
	}
}

func TestHealthWireJSON(t *testing.T) {
	local := engine.Candidate{
		Name: "local", Isolation: sandbox.IsolationProcess, Available: true, Ready: true, Reason: "ok <&>",
		Details: map[string]string{"python3": "/usr/bin/python3"}, Enforcement: map[string]string{"wall": "execbox timer"},
		Sessions: true, Unisolated: true, AllowedByCfg: true,
		Capacity: &engine.Lane{Name: "host", Slots: 2, InUse: 1, Source: "the host's 2 cores <&>"},
		Warm:     []sandbox.Warm{{Shape: "img <&>", Idle: 1, Starting: 2, Target: 3, Why: "a fixed 3"}},
	}
	allSet(t, "engine.Candidate", &local)
	full := engine.Report{
		Configured: "auto", Backend: "local", Isolation: "none", SelectedBecause: "auto: the only one <allowed>",
		Defaults: sandbox.Defaults, Candidates: []engine.Candidate{local, {Name: "gvisor", Reason: "not probed"}},
		Pools: engine.PoolsStatus{Size: 2, Reason: "none <yet>", Pools: []engine.PoolStats{{Backend: "local", Template: "python", Size: 2,
			Ready: 1, Filling: 1, Hits: 3, Misses: 4, Made: 5, Failed: 6, Lost: 7, IdleMemory: 8, LastRefill: 9, Error: "e <&>"}}},
	}
	allSet(t, "engine.Report", &full)
	for name, r := range map[string]engine.Report{
		"full":          full,
		"no candidates": {Configured: "off", SelectedBecause: "execution is turned off"},
		"empty":         {Candidates: []engine.Candidate{}},
	} {
		sameJSON(t, name, r, Health(r))
	}
}

// TestAuditWireJSON: an audit record keeps its JSON; its limits are
// Limits in their JSON form (seconds and bytes).
func TestAuditWireJSON(t *testing.T) {
	exit := 3
	rec := audit.Record{
		ID: "run1", Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), RequestID: "req1", Token: "ci", Operation: "run",
		Backend: "native", Isolation: "process", Limits: &sandbox.Limits{Wall: 1500 * time.Millisecond, Memory: 64 * sandbox.MiB},
		Reason: "exited", ExitCode: &exit, Duration: 2 * time.Second,
		Usage:      &sandbox.Usage{Wall: time.Second, CPU: time.Millisecond, PeakMemory: 1 << 20},
		CodeSHA256: audit.Hash("<print>"), Code: "<print>", ErrorCode: "busy", Remote: "192.0.2.7", Session: "s1",
		RunID: "r1", NodeName: "n1", ToolCallID: "c1", Terminal: "t1", Inputs: []audit.Input{{Path: "a", Size: 1, SHA256: "ab"}, {Size: 2, SHA256: "cd"}},
	}
	allSet(t, "audit.Record", &rec)
	got, err := json.Marshal(Audit([]audit.Record{rec, {ID: "fn1", Time: rec.Time, Token: "anonymous", Operation: "lint"}}, 7))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"records":[{"id":"run1","time":"2026-01-02T03:04:05.000000006Z","request_id":"req1","token":"ci","kind":"run",` +
		`"backend":"native","isolation":"process","limits":{"wall":1.5,"memory":67108864},"reason":"exited","exit_code":3,` +
		`"duration_ns":2000000000,"usage":{"wall_ns":1000000000,"cpu_ns":1000000,"peak_memory_bytes":1048576},` +
		`"code_sha256":"` + audit.Hash("<print>") + `","code":"\u003cprint\u003e","error_code":"busy","remote":"192.0.2.7","session":"s1",` +
		`"run_id":"r1","node_name":"n1","tool_call_id":"c1","terminal":"t1","inputs":[{"path":"a","size":1,"sha256":"ab"},{"size":2,"sha256":"cd"}]},` +
		`{"id":"fn1","time":"2026-01-02T03:04:05.000000006Z","token":"anonymous","kind":"lint","duration_ns":0}],"total":7}`
	if string(got) != want {
		t.Errorf("audit JSON\n got %s\nwant %s", got, want)
	}
	if b, _ := json.Marshal(Audit([]audit.Record{}, 0)); string(b) != `{"records":[],"total":0}` {
		t.Errorf("no records: %s", b)
	}
	q := v1.AuditQuery{Token: "ci", Operation: v1.OpLint, ErrorCode: "busy", RunID: "r1", Since: rec.Time, Until: rec.Time.Add(time.Hour), Limit: 7}
	if got := AuditQueryOf(q); got != (audit.Query{Token: "ci", Operation: "lint", ErrorCode: "busy", RunID: "r1", Since: q.Since, Until: q.Until, Limit: 7}) {
		t.Errorf("query %+v", got)
	}
}

// TestCodesAgree: what the API documents is what the packages behind it
// use, though api/v1 imports none of them.
func TestCodesAgree(t *testing.T) {
	for _, c := range []struct{ wire, pkg any }{
		{v1.CodeUnauthenticated, auth.CodeUnauthenticated},
		{v1.CodeRateLimited, auth.CodeRateLimited},
		{v1.CodeTooManyInFlight, auth.CodeTooManyInFlight},
		{v1.DefaultAuditLimit, audit.DefaultLimit},
		{v1.MaxAuditLimit, audit.MaxLimit},
	} {
		if c.wire != c.pkg {
			t.Errorf("api/v1 says %v, the package %v", c.wire, c.pkg)
		}
	}
}
