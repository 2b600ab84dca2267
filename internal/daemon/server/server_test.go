package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/sandbox"
)

func decode[T any](t testing.TB, a answer) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatalf("decoding %s: %v", a.body, err)
	}
	return v
}

func TestRunCommandAndCode(t *testing.T) {
	requirePython(t)
	en := newEnv(t, setup{})
	a := en.do("POST", "/v1/runs", v1.RunRequest{
		Command: []string{"sh", "-c", `cat; cat in/data.txt; echo "$GREETING" >&2; echo out > made.txt; exit 3`},
		Stdin:   "from stdin\n",
		Files:   map[string][]byte{"in/data.txt": []byte("from a file\n")},
		Env:     map[string]string{"GREETING": "hello"},
	})
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	res := decode[v1.RunResult](t, a)
	if res.Reason != sandbox.ReasonExited || res.ExitCode != 3 || res.Stdout != "from stdin\nfrom a file\n" || res.Stderr != "hello\n" || res.Backend != "local" || res.ID == "" {
		t.Fatalf("result %+v", res)
	}
	if len(res.Artifacts) != 1 || res.Artifacts[0].Path != "made.txt" || string(res.Artifacts[0].Data) != "out\n" {
		t.Fatalf("artifacts %+v", res.Artifacts)
	}

	for _, tc := range []struct{ lang, code, want string }{
		{"python", "import sys; print(sys.argv[0], sys.stdin.read())", "main.py piped\n"},
		{"", "print('default is python')", "default is python\n"},
		{"sh", "echo $0; cat", "main.sh\npiped"},
		{"bash", "echo ${BASH_VERSION:+bash}", "bash\n"},
	} {
		a := en.do("POST", "/v1/runs", v1.RunRequest{Code: tc.code, Language: tc.lang, Stdin: "piped"})
		res := decode[v1.RunResult](t, a)
		if a.status != http.StatusOK || res.Stdout != tc.want || len(res.Artifacts) != 0 {
			t.Errorf("%s: status %d, result %+v, want stdout %q and no artifacts", tc.lang, a.status, res, tc.want)
		}
	}

	// A timeout is a result, not an error.
	a = en.do("POST", "/v1/runs", map[string]any{"command": []string{"sleep", "10"}, "limits": map[string]any{"wall": "300ms"}})
	res = decode[v1.RunResult](t, a)
	if a.status != http.StatusOK || res.Reason != sandbox.ReasonTimeout {
		t.Fatalf("timeout: status %d, %+v", a.status, res)
	}
	// Sizes and durations in either form.
	a = en.do("POST", "/v1/runs", `{"command":["true"],"limits":{"memory":"64m","wall":2.5,"output":1024}}`)
	if a.status != http.StatusOK {
		t.Fatalf("limits: status %d: %s", a.status, a.body)
	}
}

func TestRunInvalidNamesTheField(t *testing.T) {
	en := newEnv(t, setup{})
	for _, tc := range []struct {
		body       string
		status     int
		code       string
		field      string
		detailWant string
	}{
		{`{}`, 400, "invalid_request", "command", "give a command or code"},
		{`{"command":["a"],"code":"b"}`, 400, "invalid_request", "command", "not both"},
		{`{"code":"x","language":"cobol"}`, 400, "invalid_request", "language", "cobol"},
		{`{"command":["a"],"language":"python"}`, 400, "invalid_request", "language", "not to a command"},
		{`{"command":["a"],"limits":{"memory":"lots"}}`, 400, "invalid_request", "limits.memory", "256m"},
		{`{"command":["a"],"limits":{"wall":"soon"}}`, 400, "invalid_request", "limits.wall", "1500ms"},
		{`{"command":["a"],"limits":{"pids":"many"}}`, 400, "invalid_request", "limits.pids", "integer"},
		{`{"command":["a"],"limits":{"memory":-1}}`, 400, "limit_invalid", "limits", "limits.memory"},
		{`{"command":["a"],"limitz":{}}`, 400, "invalid_request", "limitz", "unknown field"},
		{`{"command":["a"],"files":{"../x":"eA=="}}`, 400, "path_invalid", "files", "../x"},
		{`{"command":["a"],"files":{"x":"not base64!"}}`, 400, "invalid_request", "", "base64"},
		{`{"command":["a"],"stdin":"x","stdin_base64":"eA=="}`, 400, "invalid_request", "stdin", "not both"},
		{`{"command":["a"],"env":{"A=B":"c"}}`, 400, "env_invalid", "env", "A=B"},
		{`{"command":["a"]} {}`, 400, "invalid_request", "", "after the JSON object"},
		{`{"command":`, 400, "invalid_request", "", "ends inside the JSON"},
		{`{"command":]`, 400, "invalid_request", "", "not valid JSON"},
		{``, 400, "invalid_request", "", "empty"},
		{`{"command":["a"],"tier":"gold"}`, 400, "tier_unknown", "", "gold"},
		{`{"command":["a"],"network":"host"}`, 403, "network_denied", "network", "host"},
	} {
		a := en.do("POST", "/v1/runs", tc.body)
		if a.status != tc.status {
			t.Errorf("%s: status %d, want %d: %s", tc.body, a.status, tc.status, a.body)
			continue
		}
		p := a.problem(t)
		if p.Code != tc.code || p.Field != tc.field || !strings.Contains(p.Detail, tc.detailWant) {
			t.Errorf("%s: problem %+v, want code %s, field %q, detail with %q", tc.body, p, tc.code, tc.field, tc.detailWant)
		}
	}
}

func TestBodyLimit(t *testing.T) {
	en := newEnv(t, setup{maxBody: 4096})
	// Exactly at the bound is accepted; one byte over is 413.
	mk := func(n int) string {
		head := `{"command":["true"],"stdin":"`
		return head + strings.Repeat("x", n-len(head)-2) + `"}`
	}
	if a := en.do("POST", "/v1/runs", mk(4096)); a.status != http.StatusOK {
		t.Fatalf("4096 bytes: status %d: %s", a.status, a.body)
	}
	a := en.do("POST", "/v1/runs", mk(4097))
	if a.status != http.StatusRequestEntityTooLarge || a.problem(t).Code != v1.CodeBodyTooLarge {
		t.Fatalf("4097 bytes: status %d: %s", a.status, a.body)
	}
	// Function requests have the protocol's own 128 KiB bound.
	requirePython(t)
	code := "def main():\n    return 1\n#"
	fn := func(n int) string {
		b, _ := json.Marshal(map[string]string{"code": code + strings.Repeat("x", n)})
		return string(b)
	}
	a = en.do("POST", "/v1/functions:execute", fn(function.MaxCode-len(code)))
	if a.status != http.StatusOK {
		t.Fatalf("64 KiB of code: status %d: %s", a.status, a.body)
	}
	a = en.do("POST", "/v1/functions:execute", fn(function.MaxCode-len(code)+1))
	if a.status != http.StatusBadRequest || a.problem(t).Code != function.CodeInvalidCode {
		t.Fatalf("64 KiB + 1 of code: status %d: %s", a.status, a.body)
	}
	big, _ := json.Marshal(map[string]any{"code": code, "params": map[string]string{"p": strings.Repeat("y", function.MaxInput)}})
	a = en.do("POST", "/v1/functions:execute", big)
	if a.status != http.StatusRequestEntityTooLarge || a.problem(t).Code != function.CodeInputTooLarge {
		t.Fatalf("over 128 KiB: status %d: %s", a.status, a.body)
	}
}

// TestSlowBody: a body that does not arrive within the body timeout is
// answered 408, holding no run slot meanwhile; one that does is served.
func TestSlowBody(t *testing.T) {
	en := newEnv(t, setup{maxRuns: 1})
	en.srv.opts.BodyTimeout = 300 * time.Millisecond
	for _, path := range []string{"/v1/runs", "/v1/functions:execute"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(en.http.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"comm", path)
		// Meanwhile the slot is free.
		if a := en.do("POST", "/v1/runs", `{"command":["true"]}`); a.status != 200 {
			t.Errorf("%s: a run while a body is pending: %d %s", path, a.status, a.body)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v\n%s", path, err, en.logs)
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != 408 || !strings.Contains(string(b), v1.CodeBodyTimeout) {
			t.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
}

func TestFunctions(t *testing.T) {
	requirePython(t)
	en := newEnv(t, setup{})
	call := func(path string, req map[string]any) answer { return en.do("POST", path, req) }

	a := call("/v1/functions:execute", map[string]any{"code": "def main(a, b):\n    print('adding')\n    return a + b\n", "params": map[string]int{"a": 2, "b": 40}})
	r := decode[function.Response](t, a)
	if a.status != 200 || !r.OK || string(r.Data) != "42" || r.Stdout != "adding\n" || r.Backend != "local" {
		t.Fatalf("execute: %d %s", a.status, a.body)
	}
	// The code ran and failed by itself: 200, ok false, the code.
	for _, tc := range []struct {
		req  map[string]any
		code string
	}{
		{map[string]any{"code": "def main():\n    return 1/0\n"}, function.CodeUserError},
		{map[string]any{"code": "def main(:\n"}, function.CodeSyntaxError},
		{map[string]any{"code": "def main():\n    pass\n", "entrypoint": "nope"}, function.CodeEntrypointNotFound},
		{map[string]any{"code": "def main():\n    return float('nan')\n"}, function.CodeResultInvalid},
		{map[string]any{"code": "def main():\n    while True: pass\n", "timeout": 1}, function.CodeTimeout},
	} {
		a := call("/v1/functions:execute", tc.req)
		r := decode[function.Response](t, a)
		if a.status != 200 || r.OK || r.Code != tc.code {
			t.Errorf("%v: %d %s, want 200 with code %s", tc.req["code"], a.status, a.body, tc.code)
		}
	}
	// Failures around the code: problems with the code's status.
	for _, tc := range []struct {
		req    map[string]any
		status int
		code   string
	}{
		{map[string]any{"code": " "}, 400, function.CodeInvalidCode},
		{map[string]any{"code": "def main(): pass", "mode": "dance"}, 400, function.CodeInvalidRequest},
		{map[string]any{"code": "def main(): pass", "timeout": 61}, 400, function.CodeInvalidRequest},
		{map[string]any{"code": "def main(): pass", "colour": 1}, 400, function.CodeInvalidRequest},
		// The runner process dies under the code: the sandbox failed.
		{map[string]any{"code": "import os\ndef main():\n    os._exit(3)\n"}, 500, function.CodeSandboxFailed},
		{map[string]any{"code": "def main(): pass", "tier": "standard"}, 503, function.CodeIsolationUnavailable},
	} {
		a := call("/v1/functions:execute", tc.req)
		if a.status != tc.status || a.problem(t).Code != tc.code {
			t.Errorf("%v: %d %s, want %d with code %s", tc.req, a.status, a.body, tc.status, tc.code)
		}
	}
	// Lint: diagnostics for broken code, [] for good code, never run.
	a = call("/v1/functions:lint", map[string]any{"code": "def main(:\n    pass\n"})
	r = decode[function.Response](t, a)
	if a.status != 200 || !r.OK || len(r.Diagnostics) != 1 || r.Diagnostics[0].Line != 1 {
		t.Fatalf("lint: %d %s", a.status, a.body)
	}
	a = call("/v1/functions:lint", map[string]any{"code": "import os\nos._exit(3)\ndef main():\n    pass\n", "mode": "execute"})
	r = decode[function.Response](t, a)
	if a.status != 200 || !r.OK || r.Diagnostics == nil || len(r.Diagnostics) != 0 {
		t.Fatalf("lint of valid code: %d %s", a.status, a.body)
	}
}

// TestBusy: every limit that answers 429 does so with Retry-After and a
// problem, and is counted.
func TestBusy(t *testing.T) {
	requirePython(t)
	secret := "tok-secret"
	tok, _ := auth.ParseToken("ci:" + auth.HashSecret(secret) + ":concurrency=1")
	rated, _ := auth.ParseToken("rated:" + auth.HashSecret("rated-secret") + ":rate=0.05:burst=2")
	en := newEnv(t, setup{maxRuns: 1, fnConc: 1, tokens: []auth.Token{tok, rated, auth.FromSecret("admin")}})
	bearer := func(s string) []string { return []string{"Authorization", "Bearer " + s} }

	// The slow calls wait for gate files the test creates when it is done
	// (the local backend runs on the host), not for a time that a loaded
	// machine may outlast.
	gates := t.TempDir()
	runGate, fnGate := filepath.Join(gates, "run"), filepath.Join(gates, "fn")
	// One slow run holds the only run slot.
	started := make(chan struct{})
	done := make(chan answer)
	go func() {
		cmd := fmt.Sprintf(`{"command":["sh","-c","echo up; while [ ! -e %s ]; do sleep 0.01; done"]}`, runGate)
		req, _ := http.NewRequest("POST", en.http.URL+"/v1/runs?stream=1", strings.NewReader(cmd))
		req.Header.Set("Authorization", "Bearer admin")
		req.Header.Set("Content-Type", "application/json")
		resp, err := en.http.Client().Do(req)
		if err != nil {
			t.Error(err)
			close(started)
			done <- answer{}
			return
		}
		br := bufio.NewReader(resp.Body)
		br.ReadString('\n') // the first event: the run is in its slot
		close(started)
		rest, _ := io.ReadAll(br)
		resp.Body.Close()
		done <- answer{status: resp.StatusCode, body: rest}
	}()
	<-started
	a := en.do("POST", "/v1/runs", `{"command":["true"]}`, bearer("admin")...)
	if a.status != 429 || a.header.Get("Retry-After") != "1" || a.problem(t).Code != v1.CodeBusy {
		t.Errorf("run slots: %d %v %s", a.status, a.header, a.body)
	}
	// The function executor's gate is separate: functions still run…
	fnSlow := make(chan answer)
	go func() {
		code := fmt.Sprintf("import os, time\ndef main():\n    while not os.path.exists(%q):\n        time.sleep(0.01)\n", fnGate)
		body, _ := json.Marshal(map[string]string{"code": code})
		fnSlow <- en.do("POST", "/v1/functions:execute", string(body), bearer(secret)...)
	}()
	// …until it is full. Wait until the slow call holds the slot.
	waitFor(t, func() bool {
		return strings.Contains(scrape(t, en, bearer("admin")...), `execbox_executions_in_flight{kind="function"} 1`)
	})
	a = en.do("POST", "/v1/functions:execute", `{"code":"def main(): pass"}`, bearer("admin")...)
	if a.status != 429 || a.header.Get("Retry-After") == "" || a.problem(t).Code != function.CodeBusy {
		t.Errorf("function gate: %d %s", a.status, a.body)
	}
	// ci has one call in flight, its limit.
	a = en.do("POST", "/v1/functions:lint", `{"code":"def main(): pass"}`, bearer(secret)...)
	if a.status != 429 || a.problem(t).Code != v1.CodeTooManyInFlight {
		t.Errorf("token concurrency: %d %s", a.status, a.body)
	}
	touch(t, fnGate)
	if r := <-fnSlow; r.status != 200 {
		t.Errorf("slow function: %d %s", r.status, r.body)
	}
	// rated: a burst of 2, then 429 with a Retry-After of at most 20 s
	// (0.05/s: slow enough that no token comes back while the calls run on
	// a loaded host — at 0.5/s a third call was let in once at a load of 16).
	for i := range 3 {
		a = en.do("POST", "/v1/functions:lint", `{"code":"def main(): pass"}`, bearer("rated-secret")...)
		after, _ := strconv.Atoi(a.header.Get("Retry-After"))
		switch {
		case i < 2 && a.status != 200:
			t.Errorf("rated call %d: %d %s", i, a.status, a.body)
		case i == 2 && (a.status != 429 || after < 1 || after > 20 || a.problem(t).Code != v1.CodeRateLimited):
			t.Errorf("rated call %d: %d %v %s", i, a.status, a.header, a.body)
		}
	}
	touch(t, runGate)
	if r := <-done; r.status != 200 || !strings.Contains(string(r.body), `"reason":"exited"`) {
		t.Errorf("slow run: %d %s", r.status, r.body)
	}
	m := scrape(t, en, bearer("admin")...)
	for _, want := range []string{
		`execbox_busy_rejections_total{code="busy",kind="run"} 1`,
		`execbox_busy_rejections_total{code="busy",kind="function"} 1`,
		`execbox_busy_rejections_total{code="too_many_in_flight",kind="lint"} 1`,
		`execbox_busy_rejections_total{code="rate_limited",kind="lint"} 1`,
		`execbox_executions_in_flight{kind="run"} 0`,
		`execbox_executions_in_flight{kind="function"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func scrape(t testing.TB, en *env, header ...string) string {
	t.Helper()
	a := en.do("GET", "/metrics", nil, header...)
	if a.status != 200 {
		t.Fatalf("metrics: %d", a.status)
	}
	return string(a.body)
}

// touch creates an empty file at path: a gate a waiting program polls for.
func touch(t testing.TB, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
	}
}

func TestAuth(t *testing.T) {
	user, _ := auth.ParseToken("user:" + auth.HashSecret("user-secret"))
	en := newEnv(t, setup{tokens: []auth.Token{user, auth.FromSecret("admin-secret")}})
	for _, h := range []string{"", "Bearer", "Bearer wrong", "Basic dXNlcjpwdw==", "user-secret"} {
		a := en.do("GET", "/v1/health", nil, "Authorization", h)
		if a.status != 401 || a.header.Get("WWW-Authenticate") == "" || a.problem(t).Code != v1.CodeUnauthenticated {
			t.Errorf("Authorization %q: %d %v %s", h, a.status, a.header, a.body)
		}
	}
	if a := en.do("GET", "/v1/health", nil, "Authorization", "bearer user-secret"); a.status != 200 {
		t.Errorf("user: %d %s", a.status, a.body)
	}
	a := en.do("GET", "/v1/audit", nil, "Authorization", "Bearer user-secret")
	if a.status != 403 || a.problem(t).Code != v1.CodeForbidden {
		t.Errorf("user on audit: %d %s", a.status, a.body)
	}
	if a := en.do("GET", "/v1/audit", nil, "Authorization", "Bearer admin-secret"); a.status != 200 {
		t.Errorf("admin on audit: %d %s", a.status, a.body)
	}
	// Public routes need no token; /metrics does (issue 22), unless
	// configured public.
	for _, p := range []string{"/healthz", "/readyz", "/v1/openapi.json"} {
		if a := en.do("GET", p, nil); a.status != 200 {
			t.Errorf("%s: %d", p, a.status)
		}
	}
	if a := en.do("GET", "/metrics", nil); a.status != 401 {
		t.Errorf("/metrics without a token: %d", a.status)
	}
	if a := en.do("GET", "/metrics", nil, "Authorization", "Bearer user-secret"); a.status != 200 {
		t.Errorf("/metrics with a token: %d", a.status)
	}
	open := newEnv(t, setup{tokens: []auth.Token{auth.FromSecret("s")}, publicMetrics: true})
	if a := open.do("GET", "/metrics", nil); a.status != 200 {
		t.Errorf("/metrics with server.public_metrics: %d", a.status)
	}
	// Each failed authentication (credentials that match no token) leaves
	// an audit row of kind auth, with the caller's address and no token
	// (issue 22: they left none); requests without credentials leave none.
	// The token name is logged.
	recs, total, err := en.audit.Query(context.Background(), audit.Query{Operation: audit.OpAuth})
	if err != nil || total != 4 || recs[0].Token != "" || recs[0].Remote != "127.0.0.1" || recs[0].ErrorCode != v1.CodeUnauthenticated {
		t.Errorf("auth rows: %d %+v %v, want 4 (the bad headers but the empty one)", total, recs, err)
	}
	if n := en.auditCount(); n != 4 {
		t.Errorf("%d audit rows, want only the 4 failed authentications", n)
	}
	if !strings.Contains(en.logs.String(), `"token":"user"`) {
		t.Errorf("logs do not name the token:\n%s", en.logs)
	}
	if strings.Contains(en.logs.String(), "user-secret") {
		t.Errorf("a secret reached the logs")
	}
}

// TestAuditWithoutToken: with no token configured the audit route is
// refused, never open to anonymous callers.
func TestAuditWithoutToken(t *testing.T) {
	en := newEnv(t, setup{})
	a := en.do("GET", "/v1/audit", nil)
	if a.status != 403 || !strings.Contains(a.problem(t).Detail, "admin token") {
		t.Fatalf("%d %s", a.status, a.body)
	}
	en = newEnv(t, setup{noAudit: true, tokens: []auth.Token{auth.FromSecret("s")}})
	a = en.do("GET", "/v1/audit", nil, "Authorization", "Bearer s")
	if a.status != 404 || a.problem(t).Code != "audit_disabled" {
		t.Fatalf("%d %s", a.status, a.body)
	}
}

func TestRoutingProblems(t *testing.T) {
	en := newEnv(t, setup{})
	a := en.do("GET", "/v2/runs", nil)
	if a.status != 404 || a.problem(t).Code != v1.CodeNotFound {
		t.Errorf("404: %d %s", a.status, a.body)
	}
	a = en.do("PUT", "/v1/runs", nil)
	if a.status != 405 || a.header.Get("Allow") != "POST" || a.problem(t).Code != v1.CodeMethodNotAllowed {
		t.Errorf("405: %d %v %s", a.status, a.header, a.body)
	}
	a = en.do("POST", "/v1/runs", `command=true`, "Content-Type", "application/x-www-form-urlencoded")
	if a.status != 415 || a.problem(t).Code != v1.CodeUnsupportedMedia {
		t.Errorf("415: %d %s", a.status, a.body)
	}
	a = en.do("POST", "/v1/functions:lint", `code=x`, "Content-Type", "text/plain")
	if a.status != 415 {
		t.Errorf("415 on functions: %d %s", a.status, a.body)
	}
	a = en.do("POST", "/v1/runs", `{"command":["true"]}`, "Content-Type", "application/json; charset=utf-8")
	if a.status != 200 {
		t.Errorf("JSON with a charset: %d %s", a.status, a.body)
	}
}

func TestUnavailableAndDenied(t *testing.T) {
	en := newEnv(t, setup{})
	// No backend here gives a tier's isolation (only local is built):
	// asking again cannot help, 400, nothing ran.
	a := en.do("POST", "/v1/runs", `{"command":["true"],"tier":"standard"}`)
	if a.status != 400 || a.problem(t).Code != "isolation_unsupported" {
		t.Errorf("tier: %d %s", a.status, a.body)
	}
	a = en.do("POST", "/v1/runs", `{"command":["true"],"min_isolation":"vm"}`)
	if a.status != 403 || a.problem(t).Code != "isolation_too_weak" {
		t.Errorf("min_isolation: %d %s", a.status, a.body)
	}
	off := newEnv(t, setup{engineOff: true})
	a = off.do("POST", "/v1/runs", `{"command":["true"]}`)
	if a.status != 403 || a.problem(t).Code != "backend_off" {
		t.Errorf("off: %d %s", a.status, a.body)
	}
	a = off.do("GET", "/readyz", nil)
	if st := decode[v1.Status](t, a); a.status != 503 || st.OK || !strings.Contains(st.Reason, "off") {
		t.Errorf("readyz with backend off: %d %s", a.status, a.body)
	}
}

// TestStream: output arrives as events before the run ends, a character
// split across writes is never split across events, bytes that are not
// UTF-8 travel as base64, and the stream ends with the result. Closing the
// stream cancels the run.
func TestStream(t *testing.T) {
	en := newEnv(t, setup{})
	body := `{"command":["sh","-c","printf 'a\\303'; sleep 0.2; printf '\\251b\\n'; printf 'e\\377' >&2; echo end"]}`
	a := en.do("POST", "/v1/runs?stream=1", body)
	if a.status != 200 || a.header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%d %v %s", a.status, a.header, a.body)
	}
	var out, errs []byte
	var res *v1.RunResult
	var types []string
	err := v1.ReadEvents(strings.NewReader(string(a.body)), func(ev *v1.StreamEvent) error {
		types = append(types, ev.Type)
		switch ev.Type {
		case v1.EventStdout:
			if ev.DataBase64 != nil {
				t.Errorf("valid UTF-8 sent as base64: %+v", ev)
			}
			out = append(out, ev.Bytes()...)
		case v1.EventStderr:
			if ev.DataBase64 == nil {
				t.Errorf("invalid UTF-8 sent as text: %+v", ev)
			}
			errs = append(errs, ev.Bytes()...)
		case v1.EventResult:
			res = ev.Result
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "aéb\nend\n" || string(errs) != "e\xff" || res == nil || res.Stdout != string(out) || types[len(types)-1] != "result" {
		t.Fatalf("stdout %q stderr %q result %+v types %v", out, errs, res, types)
	}

	// The stream passes on no more than the output limit, as the result.
	a = en.do("POST", "/v1/runs?stream=1", `{"command":["sh","-c","head -c 100000 /dev/zero | tr '\\0' x"],"limits":{"output":1000}}`)
	n, last := 0, ""
	v1.ReadEvents(strings.NewReader(string(a.body)), func(ev *v1.StreamEvent) error {
		n += len(ev.Bytes())
		last = ev.Type
		if ev.Result != nil && (!ev.Result.StdoutTruncated || len(ev.Result.Stdout) != 1000) {
			t.Errorf("capped result %+v", ev.Result)
		}
		return nil
	})
	if n != 1000 || last != v1.EventResult {
		t.Fatalf("streamed %d bytes (last event %s), want the 1000 of the output limit", n, last)
	}

	// SSE.
	a = en.do("POST", "/v1/runs?stream=1", `{"command":["echo","hi"]}`, "Accept", "text/event-stream")
	if a.status != 200 || a.header.Get("Content-Type") != "text/event-stream" ||
		!strings.HasPrefix(string(a.body), "event: stdout\ndata: {\"type\":\"stdout\",\"data\":\"hi\\n\"}\n\nevent: result\ndata: {") {
		t.Fatalf("SSE: %d %v %q", a.status, a.header, a.body)
	}
	// A run refused before any output is a plain problem.
	a = en.do("POST", "/v1/runs?stream=1", `{"command":["true"],"tier":"standard"}`)
	if a.status != 400 || a.problem(t).Code != "isolation_unsupported" {
		t.Fatalf("refused stream: %d %s", a.status, a.body)
	}

	// The first event arrives while the program still sleeps; closing the
	// stream cancels the run.
	marker := strconv.Itoa(int(time.Now().UnixNano()%90000000 + 10000000))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", en.http.URL+"/v1/runs?stream=1",
		strings.NewReader(`{"command":["sh","-c","echo up; sleep `+marker+`"]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := en.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != `{"type":"stdout","data":"up\n"}`+"\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	cancel()
	resp.Body.Close()
	waitFor(t, func() bool { return en.auditCount() == 5 })
	recs, _, err := en.audit.Query(context.Background(), audit.Query{Limit: 1})
	if err != nil || recs[0].Reason != string(sandbox.ReasonCanceled) {
		t.Fatalf("the abandoned run's record: %+v %v", recs, err)
	}
	if left := processes("sleep " + marker); len(left) > 0 {
		t.Fatalf("still running after the stream closed: %v", left)
	}
}

// processes lists processes whose command line contains marker.
func processes(marker string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), marker) {
			found = append(found, e.Name())
		}
	}
	return found
}

// TestAuditEveryExecution: one row per execution request, refused ones
// included, with the token, kind, code hash and outcome.
func TestAuditEveryExecution(t *testing.T) {
	requirePython(t)
	user, _ := auth.ParseToken("user:" + auth.HashSecret("u"))
	en := newEnv(t, setup{tokens: []auth.Token{user, auth.FromSecret("admin")}})
	bearer := []string{"Authorization", "Bearer u"}
	en.do("POST", "/v1/runs", `{"command":["sh","-c","exit 4"],"limits":{"memory":"64m"}}`, bearer...)
	en.do("POST", "/v1/runs", `{"code":"print(1)"}`, bearer...)
	en.do("POST", "/v1/runs", `{"command":["true"],"network":"host"}`, bearer...)
	en.do("POST", "/v1/functions:execute", `{"code":"def main():\n    return 1\n"}`, bearer...)
	en.do("POST", "/v1/functions:execute", `{"code":"def main(:"}`, bearer...)
	en.do("POST", "/v1/functions:lint", `{"code":"def main(): pass"}`, bearer...)
	en.do("POST", "/v1/runs", `{"command":["true"]}`)                                  // 401, no credentials: no row
	en.do("POST", "/v1/runs", `{"command":["true"]}`, "Authorization", "Bearer guess") // 401: a row of kind auth
	a := en.do("GET", "/v1/audit?token=user&limit=10", nil, "Authorization", "Bearer admin")
	got := decode[v1.Audit](t, a)
	if a.status != 200 || got.Total != 6 || len(got.Records) != 6 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	// Newest first.
	r := got.Records
	want := []struct {
		op              v1.Operation
		reason, errCode string
	}{
		{"lint", "ok", ""},
		{"function", "syntax_error", "syntax_error"},
		{"function", "ok", ""},
		{"run", "", "network_denied"},
		{"run", "exited", ""},
		{"run", "exited", ""},
	}
	for i, w := range want {
		if r[i].Operation != w.op || r[i].Reason != w.reason || r[i].ErrorCode != w.errCode || r[i].Token != "user" || r[i].RequestID == "" {
			t.Errorf("record %d: %+v, want %+v", i, r[i], w)
		}
	}
	run := r[5]
	if run.ExitCode == nil || *run.ExitCode != 4 || run.Backend != "local" || run.Isolation != "none" ||
		run.Limits == nil || run.Limits.Memory != 64*sandbox.MiB || run.Limits.Wall != sandbox.Defaults.Wall ||
		run.CodeSHA256 != runHash(&v1.RunRequest{Command: []string{"sh", "-c", "exit 4"}}) || run.Code != `["sh","-c","exit 4"]` ||
		run.Usage == nil || run.Duration <= 0 || run.Remote != "127.0.0.1" {
		t.Errorf("run record %+v", run)
	}
	if r[4].CodeSHA256 != runHash(&v1.RunRequest{Code: "print(1)"}) || r[4].Code != "print(1)" || r[2].Limits == nil || r[2].Limits.Wall != function.DefaultTimeout {
		t.Errorf("records %+v %+v", r[4], r[2])
	}
	// A refused request keeps its hash, not its code (issue 22: refused
	// requests stored their code).
	if r[3].CodeSHA256 == "" || r[3].Code != "" {
		t.Errorf("the refused record keeps code: %+v", r[3])
	}
	a = en.do("GET", "/v1/audit?kind=auth", nil, "Authorization", "Bearer admin")
	if got := decode[v1.Audit](t, a); got.Total != 1 || got.Records[0].ErrorCode != v1.CodeUnauthenticated || got.Records[0].Remote == "" {
		t.Errorf("the failed authentication: %s", a.body)
	}
	a = en.do("GET", "/v1/audit?kind=run&error_code=network_denied", nil, "Authorization", "Bearer admin")
	if got := decode[v1.Audit](t, a); got.Total != 1 {
		t.Errorf("filtered: %s", a.body)
	}
	a = en.do("GET", "/v1/audit?limit=5000", nil, "Authorization", "Bearer admin")
	if a.status != 400 || a.problem(t).Field != "limit" {
		t.Errorf("bad limit: %d %s", a.status, a.body)
	}
}

func TestRequestIDs(t *testing.T) {
	en := newEnv(t, setup{})
	a := en.do("GET", "/healthz", nil, "X-Request-Id", "client-id.1")
	if a.header.Get("X-Request-Id") != "client-id.1" {
		t.Errorf("id not kept: %v", a.header)
	}
	a = en.do("GET", "/nope", nil, "X-Request-Id", "bad id with spaces")
	id := a.header.Get("X-Request-Id")
	if id == "" || id == "bad id with spaces" || a.problem(t).RequestID != id {
		t.Errorf("id %q, problem %s", id, a.body)
	}
	// At most 64 plain characters are kept.
	for _, tc := range []struct {
		id   string
		kept bool
	}{{strings.Repeat("a", 64), true}, {strings.Repeat("a", 65), false}} {
		a := en.do("GET", "/healthz", nil, "X-Request-Id", tc.id)
		if (a.header.Get("X-Request-Id") == tc.id) != tc.kept {
			t.Errorf("id of %d characters: kept %v, want %v", len(tc.id), !tc.kept, tc.kept)
		}
	}
	var found bool
	for _, line := range strings.Split(en.logs.String(), "\n") {
		if strings.Contains(line, `"request_id":"`+id+`"`) && strings.Contains(line, `"status":404`) {
			found = true
		}
	}
	if !found {
		t.Errorf("no log line with request id %s:\n%s", id, en.logs)
	}
}

// TestServeShutdown: on ctx's end /readyz turns false while requests are
// still served for the drain delay; a run in flight finishes; one that
// outlives the shutdown timeout is cancelled, its process tree killed;
// Serve returns after every handler.
func TestServeShutdown(t *testing.T) {
	en := newEnv(t, setup{})
	// The short run finishes when the test opens its gate, during the
	// drain; the long one never does and is cancelled at the timeout. No
	// run's length is raced against the budget.
	en.srv.opts.DrainDelay = 300 * time.Millisecond
	en.srv.opts.ShutdownTimeout = 3 * time.Second
	gate := filepath.Join(t.TempDir(), "gate")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- en.srv.Serve(ctx, ln) }()

	post := func(body string) (answer, error) {
		resp, err := http.Post(base+"/v1/runs", "application/json", strings.NewReader(body))
		if err != nil {
			return answer{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header, b}, err
	}
	marker := strconv.Itoa(int(time.Now().UnixNano()%90000000 + 10000000))
	var wg sync.WaitGroup
	var short, long answer
	var shortErr, longErr error
	wg.Go(func() {
		short, shortErr = post(fmt.Sprintf(`{"command":["sh","-c","while [ ! -e %s ]; do sleep 0.01; done; echo finished"]}`, gate))
	})
	wg.Go(func() { long, longErr = post(`{"command":["sh","-c","sleep ` + marker + `"]}`) })
	waitFor(t, func() bool { return strings.Contains(scrape(t, en), `execbox_executions_in_flight{kind="run"} 2`) })

	stop()
	waitFor(t, en.srv.Draining)
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatalf("readyz while draining: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("readyz while draining: %d", resp.StatusCode)
	}
	touch(t, gate)
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return")
	}
	wg.Wait()
	if shortErr != nil || short.status != 200 || !strings.Contains(string(short.body), "finished") {
		t.Errorf("the short run: %v %d %s", shortErr, short.status, short.body)
	}
	if longErr != nil || long.status != 200 || !strings.Contains(string(long.body), `"reason":"canceled"`) {
		t.Errorf("the long run: %v %d %s", longErr, long.status, long.body)
	}
	if left := processes("sleep " + marker); len(left) > 0 {
		t.Errorf("still running after Serve returned: %v", left)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Errorf("still answering after Serve returned")
	}
	ents, _ := os.ReadDir(en.workDir)
	if len(ents) > 0 {
		t.Errorf("work dirs left: %v", ents)
	}
}

// TestClosingRefusesNewExecutions: once the drain delay is over, a new
// run or function call on a connection still open is refused 503
// draining; health still answers.
func TestClosingRefusesNewExecutions(t *testing.T) {
	en := newEnv(t, setup{})
	en.srv.closing.Store(true)
	for _, path := range []string{"/v1/runs", "/v1/functions:execute"} {
		a := en.do("POST", path, `{"command":["true"],"code":"def main(): pass"}`)
		if a.status != 503 || a.problem(t).Code != v1.CodeDraining {
			t.Errorf("%s while closing: %d %s", path, a.status, a.body)
		}
	}
	if a := en.do("GET", "/healthz", nil); a.status != 200 {
		t.Errorf("/healthz while closing: %d", a.status)
	}
}

// TestResultWireForm: a result leaves out the enforcement prose unless
// asked (?explain=1), and gives an output that is not UTF-8 byte for byte
// in its base64 field, streamed or not.
func TestResultWireForm(t *testing.T) {
	en := newEnv(t, setup{})
	body := `{"command":["sh","-c","printf 'ok\\377\\376'; printf 'text' >&2"]}`
	for _, path := range []string{"/v1/runs", "/v1/runs?explain=1", "/v1/runs?stream=1"} {
		a := en.do("POST", path, body)
		if a.status != 200 {
			t.Fatalf("%s: %d %s", path, a.status, a.body)
		}
		doc := a.body
		if strings.Contains(path, "stream") {
			lines := bytes.Split(bytes.TrimSpace(a.body), []byte("\n"))
			var ev v1.StreamEvent
			if err := json.Unmarshal(lines[len(lines)-1], &ev); err != nil || ev.Result == nil {
				t.Fatalf("%s: last event %s: %v", path, lines[len(lines)-1], err)
			}
			doc, _ = json.Marshal(ev.Result)
		}
		var res sandbox.Result
		if err := json.Unmarshal(doc, &res); err != nil {
			t.Fatal(err)
		}
		if string(res.StdoutBase64) != "ok\xff\xfe" || res.Stdout != "" || res.Stderr != "text" || res.StderrBase64 != nil {
			t.Errorf("%s: stdout %q base64 %q, stderr %q base64 %q", path, res.Stdout, res.StdoutBase64, res.Stderr, res.StderrBase64)
		}
		if explain := strings.Contains(path, "explain"); (len(res.Enforcement) > 0) != explain {
			t.Errorf("%s: enforcement %v, want it only with explain=1", path, res.Enforcement)
		}
	}
}
