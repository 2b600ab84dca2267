package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/host/cgroups"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// server is a running `execbox serve`.
type server struct {
	t        *testing.T
	cmd      *exec.Cmd
	url      string
	work     string
	auditDB  string
	stderr   *logBuffer
	exited   chan struct{}
	exitCode int
}

// logBuffer collects the server's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(line + "\n")
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// localServe is the environment of a server on the local backend: the
// server's behaviour, not isolation, is under test here.
var localServe = []string{"EXECBOX_ALLOW_UNISOLATED=true", "EXECBOX_BACKEND=local"}

// startServer starts `execbox serve --listen 127.0.0.1:0` with env and
// waits for the address it logs. It is stopped (SIGTERM) at cleanup.
func startServer(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	s, err := launch(t, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func launch(t *testing.T, env []string, args ...string) (*server, error) {
	t.Helper()
	return launchWrapped(t, nil, env, args...)
}

// launchWrapped is launch with the serve command run by wrap, a command
// that ends by exec'ing its arguments (so the server keeps its PID), e.g.
// a shell setting a resource limit.
func launchWrapped(t *testing.T, wrap []string, env []string, args ...string) (*server, error) {
	t.Helper()
	dir := reachableTempDir(t)
	s := &server{t: t, work: filepath.Join(dir, "work"), auditDB: filepath.Join(dir, "audit.db"), stderr: &logBuffer{}, exited: make(chan struct{})}
	argv := append(append(slices.Clone(wrap), binary, "serve", "--listen", "127.0.0.1:0"), args...)
	s.cmd = exec.Command(argv[0], argv[1:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EXECBOX_") {
			s.cmd.Env = append(s.cmd.Env, kv)
		}
	}
	s.cmd.Env = append(s.cmd.Env, "EXECBOX_LOG_FORMAT=json", "EXECBOX_WORK_ROOT="+s.work, "EXECBOX_AUDIT_PATH="+s.auditDB)
	s.cmd.Env = append(s.cmd.Env, env...)
	pipe, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.stderr.add(line)
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				addr <- rec.Addr
			}
		}
		err := s.cmd.Wait()
		s.exitCode = s.cmd.ProcessState.ExitCode()
		_ = err
		close(s.exited)
	}()
	t.Cleanup(func() { s.stop() })
	select {
	case a := <-addr:
		s.url = "http://" + a
		return s, nil
	case <-s.exited:
		return s, fmt.Errorf("serve exited %d before listening:\n%s", s.exitCode, s.stderr)
	case <-time.After(30 * time.Second):
		return s, fmt.Errorf("serve did not log its address within 30s:\n%s", s.stderr)
	}
}

// stop sends SIGTERM and waits for the exit code.
func (s *server) stop() int {
	select {
	case <-s.exited:
		return s.exitCode
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		s.t.Errorf("serve did not stop within 60s of SIGTERM:\n%s", s.stderr)
	}
	return s.exitCode
}

// client returns a client for the server with token; its connections
// are closed at cleanup.
func (s *server) client(token string) *client.Client {
	s.t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	s.t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New(s.url, client.WithToken(token), client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// raw sends one request and returns status, headers and body.
func (s *server) raw(method, path, body string, header ...string) (int, http.Header, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// metric reads one sample from /metrics.
func (s *server) metric(name string) float64 {
	s.t.Helper()
	_, _, body := s.raw("GET", "/metrics", "")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		s.t.Fatalf("no metric %s", name)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// children lists the server's live child processes.
func (s *server) children() []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(s.cmd.Process.Pid) {
			out = append(out, e.Name()+" "+string(b))
		}
	}
	return out
}

// auditCount runs `execbox audit --count` with filters.
func (s *server) auditCount(filters ...string) int {
	s.t.Helper()
	r := execbox(s.t, nil, "", append([]string{"audit", "--db", s.auditDB, "--count"}, filters...)...)
	n, err := strconv.Atoi(strings.TrimSpace(r.stdout))
	if r.code != 0 || err != nil {
		s.t.Fatalf("audit --count: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	return n
}

// gateCommand is a run request whose program prints "up" and then waits
// until a file exists at gate: the test decides when it ends.
func gateCommand(gate string) string {
	return fmt.Sprintf(`{"command":["sh","-c","echo up; while [ ! -e %s ]; do sleep 0.01; done"]}`, gate)
}

// touch creates an empty file at path, opening a gate.
func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func requirePython(t *testing.T) {
	t.Helper()
	testutil.RequiresBinary(t, "python3", "python3")
}

// TestServeEndpoints calls every endpoint of a real server.
func TestServeEndpoints(t *testing.T) {
	requirePython(t)
	s := startServer(t, append(localServe, "EXECBOX_TOKEN=it-secret"))
	c := s.client("it-secret")
	ctx := context.Background()

	res, err := c.Run(ctx, &v1.RunRequest{Command: []string{"sh", "-c", "cat in.txt; echo made > out.txt"}, Files: map[string][]byte{"in.txt": []byte("in\n")}})
	if err != nil || res.Stdout != "in\n" || res.Backend != "local" || len(res.Artifacts) != 1 {
		t.Fatalf("run: %+v %v", res, err)
	}
	res, err = c.Run(ctx, &v1.RunRequest{Code: "import sys; print(sys.version_info[0])"})
	if err != nil || res.Stdout != "3\n" {
		t.Fatalf("run code: %+v %v", res, err)
	}
	var out bytes.Buffer
	res, err = c.RunStream(ctx, &v1.RunRequest{Command: []string{"sh", "-c", "echo one; sleep 0.1; echo two"}}, &out, io.Discard)
	if err != nil || out.String() != "one\ntwo\n" || res.Reason != sandbox.ReasonExited {
		t.Fatalf("stream: %+v %v %q", res, err, out.String())
	}
	st, h, body := s.raw("POST", "/v1/runs?stream=1", `{"command":["echo","sse"]}`, "Authorization", "Bearer it-secret", "Accept", "text/event-stream")
	if st != 200 || h.Get("Content-Type") != "text/event-stream" || !strings.HasPrefix(body, "event: stdout\ndata: ") || !strings.Contains(body, "event: result\n") {
		t.Fatalf("SSE: %d %v %q", st, h, body)
	}
	fr, err := c.Execute(ctx, &v1.FunctionRequest{Code: "def main(a, b):\n    return a + b\n", Params: []byte(`{"a":2,"b":40}`)})
	if err != nil || !fr.OK || string(fr.Data) != "42" {
		t.Fatalf("execute: %+v %v", fr, err)
	}
	diags, err := c.Lint(ctx, &v1.FunctionRequest{Code: "def main(:\n"})
	if err != nil || len(diags) != 1 {
		t.Fatalf("lint: %+v %v", diags, err)
	}
	health, err := c.Health(ctx)
	if err != nil || health.Backend != "local" || health.Configured != "local" {
		t.Fatalf("health: %+v %v", health, err)
	}
	bs, err := c.Backends(ctx)
	if err != nil || len(bs) == 0 {
		t.Fatalf("backends: %+v %v", bs, err)
	}
	a, err := c.Audit(ctx, v1.AuditQuery{})
	if err != nil || a.Total != 6 || a.Records[0].Operation != v1.OpLint || a.Records[0].Token != auth.DefaultName {
		t.Fatalf("audit: %+v %v", a, err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("readyz: %v", err)
	}
	for path, want := range map[string]string{
		"/healthz":         `"ok":true`,
		"/readyz":          `"ok":true`,
		"/v1/openapi.json": `"openapi":"3.1.0"`,
		"/metrics":         `execbox_executions_total{backend="local",kind="run",reason="exited"} 4`,
	} {
		st, _, body := s.raw("GET", path, "", "Authorization", "Bearer it-secret")
		if st != 200 || !strings.Contains(body, want) {
			t.Errorf("%s: %d, no %q in %.300s", path, st, want, body)
		}
	}
	if s.stop() != 0 {
		t.Fatalf("exit %d:\n%s", s.exitCode, s.stderr)
	}
	// The log is JSON lines with request ids and the token's name.
	if !strings.Contains(s.stderr.String(), `"token":"default"`) || !strings.Contains(s.stderr.String(), `"request_id":"`) ||
		strings.Contains(s.stderr.String(), "it-secret") {
		t.Errorf("log:\n%s", s.stderr)
	}
}

// TestServeErrorStatuses: every error status over a real server, each a
// problem document with its stable code.
func TestServeErrorStatuses(t *testing.T) {
	requirePython(t)
	user := "user:" + auth.HashSecret("user-secret")
	s := startServer(t, append(localServe, "EXECBOX_TOKEN=admin-secret", "EXECBOX_AUTH_TOKENS="+user,
		"EXECBOX_SERVER_MAX_BODY=4k", "EXECBOX_SERVER_MAX_RUNS=1", "EXECBOX_GVISOR_RUNSC=/nonexistent/runsc"))
	adm := []string{"Authorization", "Bearer admin-secret"}

	// 429 first: one streaming run holds the only run slot until the test
	// opens its gate (the local backend runs on the host).
	gate := filepath.Join(t.TempDir(), "gate")
	req, _ := http.NewRequest("POST", s.url+"/v1/runs?stream=1", strings.NewReader(gateCommand(gate)))
	req.Header.Set("Authorization", "Bearer admin-secret")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, `"data":"up\n"`) {
		t.Fatalf("first event %q %v", line, err)
	}
	type want struct {
		status int
		code   string
		header string
	}
	check := func(name string, w want, st int, h http.Header, body string) {
		t.Helper()
		var p v1.Problem
		if st != w.status || h.Get("Content-Type") != v1.ContentTypeProblem || json.Unmarshal([]byte(body), &p) != nil ||
			p.Code != w.code || p.Status != st || p.Type != v1.ProblemTypePrefix+w.code || (w.header != "" && h.Get(w.header) == "") {
			t.Errorf("%s: %d %v %s, want %d %s", name, st, h, body, w.status, w.code)
		}
	}
	st, h, body := s.raw("POST", "/v1/runs", `{"command":["true"]}`, adm...)
	check("429", want{429, "busy", "Retry-After"}, st, h, body)
	touch(t, gate)
	io.Copy(io.Discard, br)
	resp.Body.Close()

	for _, tc := range []struct {
		name, method, path, body string
		header                   []string
		want                     want
	}{
		{"400", "POST", "/v1/runs", `{"command":["true"],"limits":{"memory":"lots"}}`, adm, want{400, "invalid_request", ""}},
		{"400 function", "POST", "/v1/functions:execute", `{"code":""}`, adm, want{400, function.CodeInvalidCode, ""}},
		{"401", "GET", "/v1/health", "", nil, want{401, "unauthenticated", "WWW-Authenticate"}},
		{"401 wrong", "POST", "/v1/runs", `{"command":["true"]}`, []string{"Authorization", "Bearer nope"}, want{401, "unauthenticated", "WWW-Authenticate"}},
		{"403 not admin", "GET", "/v1/audit", "", []string{"Authorization", "Bearer user-secret"}, want{403, "forbidden", ""}},
		{"403 policy", "POST", "/v1/runs", `{"command":["true"],"min_isolation":"process"}`, adm, want{403, "isolation_too_weak", ""}},
		{"404", "GET", "/v1/nothing", "", nil, want{404, "not_found", ""}},
		{"405", "DELETE", "/v1/runs", "", nil, want{405, "method_not_allowed", "Allow"}},
		{"413", "POST", "/v1/runs", `{"command":["true"],"stdin":"` + strings.Repeat("x", 4096) + `"}`, adm, want{413, "body_too_large", ""}},
		{"413 function", "POST", "/v1/functions:execute", `{"code":"def main(): pass","params":{"p":"` + strings.Repeat("x", function.MaxInput) + `"}}`, adm, want{413, function.CodeInputTooLarge, ""}},
		{"415", "POST", "/v1/runs", `{"command":["true"]}`, append([]string{"Content-Type", "text/plain"}, adm...), want{415, "unsupported_media_type", ""}},
		{"500", "POST", "/v1/functions:execute", `{"code":"import os\ndef main():\n    os._exit(3)\n"}`, adm, want{500, function.CodeSandboxFailed, ""}},
		{"400 isolation", "POST", "/v1/runs", `{"command":["true"],"tier":"strict","min_isolation":"hypervisor"}`, adm, want{400, "isolation_invalid", ""}},
		{"503", "POST", "/v1/runs", `{"command":["true"],"backend":"gvisor"}`, adm, want{503, "backend_unavailable", "Retry-After"}},
	} {
		st, h, body := s.raw(tc.method, tc.path, tc.body, tc.header...)
		check(tc.name, tc.want, st, h, body)
	}
}

// TestServeRefusesNonLoopbackWithoutToken: no token, no listening beyond
// loopback; with a token it starts.
func TestServeRefusesNonLoopbackWithoutToken(t *testing.T) {
	r := execbox(t, localServe, "", "serve", "--listen", "0.0.0.0:0")
	if r.code != 125 || !strings.Contains(r.stderr, "not a loopback address and no API token") || !strings.Contains(r.stderr, "EXECBOX_TOKEN") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	r = execbox(t, append(localServe, "EXECBOX_TOKEN="), "", "serve")
	if r.code != 125 || !strings.Contains(r.stderr, "EXECBOX_TOKEN is set but empty") {
		t.Fatalf("empty token: exit %d: %s", r.code, r.stderr)
	}
	r = execbox(t, append(localServe, "EXECBOX_AUTH_TOKENS=ci:abc"), "", "serve")
	if r.code != 125 || !strings.Contains(r.stderr, "auth.tokens[0]") {
		t.Fatalf("bad token entry: exit %d: %s", r.code, r.stderr)
	}
	s, err := launch(t, append(localServe, "EXECBOX_TOKEN=wide-secret"), "--listen", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	// It listens on every address and answers, with the token only.
	if !strings.Contains(s.url, "0.0.0.0:") && !strings.Contains(s.url, "[::]:") {
		t.Errorf("listening on %s, want the wildcard address", s.url)
	}
	if st, _, _ := s.raw("GET", "/v1/health", ""); st != 401 {
		t.Errorf("/v1/health without a token: %d, want 401", st)
	}
	if st, _, body := s.raw("GET", "/v1/health", "", "Authorization", "Bearer wide-secret"); st != 200 {
		t.Errorf("/v1/health with the token: %d %s", st, body)
	}
}

// TestServeGracefulShutdown: SIGTERM turns /readyz false while requests
// are still served (drain delay), lets a short run finish, cancels a long
// one at the shutdown timeout, leaves no process or work dir, exits 0.
func TestServeGracefulShutdown(t *testing.T) {
	// The short run ends when the test opens its gate, during the drain;
	// the long one never does and is cancelled at the shutdown timeout.
	s := startServer(t, append(localServe, "EXECBOX_SERVER_DRAIN_DELAY=1s", "EXECBOX_SERVER_SHUTDOWN_TIMEOUT=3s"))
	c := s.client("")
	gate := filepath.Join(t.TempDir(), "gate")
	marker := strconv.Itoa(int(time.Now().UnixNano()%90000000 + 10000000))
	var wg sync.WaitGroup
	var short, long *v1.RunResult
	var shortErr, longErr error
	wg.Go(func() {
		short, shortErr = c.Run(context.Background(), &v1.RunRequest{Command: []string{"sh", "-c",
			"while [ ! -e " + gate + " ]; do sleep 0.01; done; echo finished"}})
	})
	wg.Go(func() {
		long, longErr = c.Run(context.Background(), &v1.RunRequest{Command: []string{"sh", "-c", "sleep " + marker}})
	})
	for deadline := time.Now().Add(10 * time.Second); len(alive("sleep "+marker)) == 0 || s.metric(`execbox_executions_in_flight{kind="run"}`) != 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the runs did not start")
		}
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	// Draining: not ready, still alive, still answering.
	var ready int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ready, _, _ = s.raw("GET", "/readyz", ""); ready == 503 || time.Now().After(deadline) {
			break
		}
	}
	live, _, _ := s.raw("GET", "/healthz", "")
	if ready != 503 || live != 200 {
		t.Errorf("while draining: readyz %d, healthz %d", ready, live)
	}
	touch(t, gate)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit")
	}
	wg.Wait()
	if s.exitCode != 0 {
		t.Errorf("exit %d:\n%s", s.exitCode, s.stderr)
	}
	if shortErr != nil || short.Stdout != "finished\n" {
		t.Errorf("short run: %+v %v", short, shortErr)
	}
	if longErr != nil || long.Reason != sandbox.ReasonCanceled {
		t.Errorf("long run: %+v %v", long, longErr)
	}
	if left := alive("sleep " + marker); len(left) > 0 {
		t.Errorf("left running: %v", left)
	}
	if left := sandboxLeftovers(s.work, false); len(left) > 0 {
		t.Errorf("work dirs left: %v", left)
	}
	for _, msg := range []string{`"msg":"draining"`, `"msg":"shutdown timeout passed; cancelling in-flight requests"`, `"msg":"stopped"`} {
		if !strings.Contains(s.stderr.String(), msg) {
			t.Errorf("no %s in the log:\n%s", msg, s.stderr)
		}
	}
	if n := s.auditCount("--kind", "run"); n != 2 {
		t.Errorf("%d run records, want 2", n)
	}
}

// TestServeTokens: hashed tokens from a config file with per-token
// limits, EXECBOX_TOKEN's admin token, and the names in the audit log.
func TestServeTokens(t *testing.T) {
	requirePython(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "execbox.yaml")
	writeFile(t, cfg, fmt.Sprintf("auth:\n  tokens:\n    - ci:%s:concurrency=1\n    - slow:%s:rate=0.2\n", auth.HashSecret("ci-secret"), auth.HashSecret("slow-secret")))
	s := startServer(t, append(localServe, "EXECBOX_CONFIG="+cfg, "EXECBOX_TOKEN=root-secret"))
	ctx := context.Background()
	ci, slow, root := s.client("ci-secret"), s.client("slow-secret"), s.client("root-secret")

	// ci: one execution at a time; its first holds until the gate opens.
	gate := filepath.Join(t.TempDir(), "gate")
	started := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := ci.RunStream(ctx, &v1.RunRequest{Command: []string{"sh", "-c", "echo up; while [ ! -e " + gate + " ]; do sleep 0.01; done"}},
			writerFunc(func([]byte) { once.Do(func() { close(started) }) }), nil)
		if err != nil {
			t.Error(err)
		}
	})
	<-started
	_, err := ci.Execute(ctx, &v1.FunctionRequest{Code: "def main(): pass"})
	if !errors.Is(err, sandbox.ErrBusy) || sandbox.CodeOf(err) != v1.CodeTooManyInFlight {
		t.Errorf("ci's second call: %v", err)
	}
	touch(t, gate)
	wg.Wait()
	// slow: one call, then rate_limited with Retry-After 5.
	if _, err := slow.Lint(ctx, &v1.FunctionRequest{Code: "def main(): pass"}); err != nil {
		t.Fatal(err)
	}
	_, err = slow.Lint(ctx, &v1.FunctionRequest{Code: "def main(): pass"})
	var p *v1.Problem
	if !errors.As(err, &p) || p.Code != v1.CodeRateLimited || p.RetryAfter != 5 {
		t.Errorf("slow's second call: %#v", err)
	}
	if _, err := slow.Audit(ctx, v1.AuditQuery{}); !errors.Is(err, sandbox.ErrDenied) {
		t.Errorf("slow on audit: %v", err)
	}
	a, err := root.Audit(ctx, v1.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, r := range a.Records {
		names[r.Token+"/"+r.ErrorCode]++
	}
	if names["ci/"] != 1 || names["ci/too_many_in_flight"] != 1 || names["slow/"] != 1 || names["slow/rate_limited"] != 1 || a.Total != 4 {
		t.Errorf("audit by token: %v (total %d)", names, a.Total)
	}
	// The CLI reads the same rows, filtered.
	r := execbox(t, nil, "", "audit", "--db", s.auditDB, "--token", "ci")
	if r.code != 0 || strings.Count(r.stdout, " ci ") != 2 || !strings.Contains(r.stdout, "too_many_in_flight") {
		t.Errorf("audit --token ci: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = execbox(t, []string{"EXECBOX_TOKEN=root-secret"}, "", "audit", "--remote", s.url, "--error-code", "rate_limited", "--json")
	var out v1.Audit
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || out.Total != 1 || out.Records[0].Token != "slow" {
		t.Errorf("audit --remote: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) {
	f(p)
	return len(p), nil
}

// TestServeRemoteCLI: `execbox run --remote` and `execbox fn --remote`
// behave as their local forms.
func TestServeRemoteCLI(t *testing.T) {
	requirePython(t)
	s := startServer(t, append(localServe, "EXECBOX_TOKEN=cli-secret"))
	tok := []string{"EXECBOX_TOKEN=cli-secret"}
	// --server names the server on every command; --remote is the same flag.
	r := execbox(t, tok, "piped", "run", "--server", s.url, "--", "sh", "-c", "cat; echo; echo oops >&2; exit 3")
	if r.code != 3 || r.stdout != "piped\n" || r.stderr != "oops\n" {
		t.Fatalf("run --remote: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	writeFile(t, in, "data")
	arts := filepath.Join(dir, "arts")
	r = execbox(t, tok, "", "run", "--remote", s.url, "--json", "--file", in+":sub/in.txt", "--artifacts", arts, "--timeout", "5s", "--",
		"sh", "-c", "tr a-z A-Z < sub/in.txt > up.txt")
	var res v1.RunResult
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || res.Backend != "local" {
		t.Fatalf("run --remote --json: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(arts, "up.txt")); err != nil || string(b) != "DATA" {
		t.Fatalf("artifact: %q %v", b, err)
	}
	// The enforcement prose only with --explain, here and locally alike.
	for _, where := range [][]string{{"--remote", s.url}, nil} {
		for _, explain := range []bool{false, true} {
			args := append(append([]string{"run"}, where...), "--json", "--", "true")
			if explain {
				args = slices.Insert(args, 1, "--explain")
			}
			r := execbox(t, append(slices.Clone(tok), localServe...), "", args...)
			var res v1.RunResult
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil {
				t.Fatalf("%v: exit %d: %s %s", args, r.code, r.stdout, r.stderr)
			}
			if got := res.Enforcement["wall"] != ""; got != explain {
				t.Errorf("%v: enforcement %v", args, res.Enforcement)
			}
		}
	}
	r = execbox(t, tok, "", "run", "--remote", s.url, "--timeout", "300ms", "--", "sleep", "5")
	if r.code != 124 {
		t.Fatalf("timeout: exit %d: %s", r.code, r.stderr)
	}
	r = execbox(t, tok, "", "run", "--remote", s.url, "--network", "host", "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "network_denied") {
		t.Fatalf("network host: exit %d: %s", r.code, r.stderr)
	}
	r = execbox(t, tok, strings.Repeat("x", 16<<20+1), "run", "--remote", s.url, "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "input_too_large") {
		t.Fatalf("stdin over 16 MiB: exit %d: %s", r.code, r.stderr)
	}
	r = execbox(t, tok, strings.Repeat("x", 16<<20), "run", "--remote", s.url, "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "body_too_large") {
		t.Fatalf("16 MiB of stdin, over the server's max_body: exit %d: %s", r.code, r.stderr)
	}
	r = execbox(t, nil, "", "run", "--remote", s.url, "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "unauthenticated") {
		t.Fatalf("no token: exit %d: %s", r.code, r.stderr)
	}
	r = execbox(t, tok, `{"code":"def main(a):\n    return a * 2\n","params":{"a":21}}`, "fn", "--remote", s.url)
	var fr function.Response
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &fr) != nil || !fr.OK || string(fr.Data) != "42" || fr.Backend != "local" {
		t.Fatalf("fn --remote: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	r = execbox(t, tok, `{"code":"def main():\n    return 1/0\n"}`, "fn", "--remote", s.url)
	if r.code != 0 || !strings.Contains(r.stdout, `"code":"user_error"`) {
		t.Fatalf("fn --remote, user error: exit %d: %s", r.code, r.stdout)
	}
	r = execbox(t, tok, `{"code":""}`, "fn", "--remote", s.url)
	if r.code != 0 || !strings.Contains(r.stdout, `"code":"invalid_code"`) {
		t.Fatalf("fn --remote, invalid: exit %d: %s", r.code, r.stdout)
	}
	r = execbox(t, tok, `{"code":"def main(): pass"}`, "fn", "--remote", "http://127.0.0.1:1")
	if r.code != 0 || !strings.Contains(r.stdout, "could not reach the execbox server") {
		t.Fatalf("fn --remote, unreachable: exit %d: %s", r.code, r.stdout)
	}
}

// sandboxLeftovers lists what the work root holds beyond what a server
// keeps while it runs: a backend's directory (native/, bwrap/, …) with this
// process's <pid>.<rand> base in it, and native's .root mount point and
// bwrap's dev (its device nodes) inside that. A stopped server leaves
// nothing at all (running false).
func sandboxLeftovers(root string, running bool) []string {
	var out []string
	backends, _ := os.ReadDir(root)
	for _, b := range backends {
		if !running || !b.IsDir() {
			out = append(out, b.Name())
			continue
		}
		bases, _ := os.ReadDir(filepath.Join(root, b.Name()))
		for _, base := range bases {
			rel := filepath.Join(b.Name(), base.Name())
			if !base.IsDir() || !perProcessBase.MatchString(base.Name()) {
				out = append(out, rel)
				continue
			}
			inside, _ := os.ReadDir(filepath.Join(root, rel))
			for _, e := range inside {
				if e.Name() != ".root" && e.Name() != "dev" {
					out = append(out, filepath.Join(rel, e.Name()))
				}
			}
		}
	}
	return out
}

var perProcessBase = regexp.MustCompile(`^[0-9]+\.[0-9a-f]+$`)

// cgroupsOf lists the sandbox cgroups of process pid still present, where
// the cgroups manager makes them (the server is this test's child: the
// same host, the same parents). A probe that cannot look fails the test
// (t.Errorf, so it may run in any goroutine) instead of seeing nothing.
func cgroupsOf(t testing.TB, pid int) []string {
	m, err := cgroups.Open()
	if err != nil {
		t.Errorf("the cgroup probe: %v", err)
		return nil
	}
	return m.Leaves(pid)
}

// reachableTempDir is a temporary directory of the test's, removed when
// it ends, for a server's work root and what its sandboxes bind: one the
// sandboxes' user can traverse (0711; bwrap runs as uid 65534), on a short
// path (a microVM's control socket, deep below the work root, must fit in
// a UNIX socket address; t.TempDir is named after the test).
func reachableTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "execbox-it-")
	if err == nil {
		err = os.Chmod(dir, 0o711)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	return dir
}

// distinctBase are the distinct last elements of paths.
func distinctBase(paths []string) map[string]bool {
	out := map[string]bool{}
	for _, p := range paths {
		out[filepath.Base(p)] = true
	}
	return out
}

// distinctTop are the distinct first elements of relative paths.
func distinctTop(paths []string) map[string]bool {
	out := map[string]bool{}
	for _, p := range paths {
		top, _, _ := strings.Cut(p, "/")
		out[top] = true
	}
	return out
}

// loadBackend is the environment the load test runs on: native where
// execbox runs on it with its cgroups (as root; rootless it is refused
// unless allow_weak_limits), named explicitly so that a stronger but
// slower backend auto would pick (gvisor) does not turn a load test into a
// start-up benchmark; else local, unless EXECBOX_REQUIRE names native.
func loadBackend(t *testing.T) (string, []string) {
	env := []string{"EXECBOX_BACKEND=native"}
	r := execbox(t, env, "", "doctor", "--json")
	var rep struct {
		Backend         string `json:"backend"`
		SelectedBecause string `json:"selected_because"`
	}
	json.Unmarshal([]byte(r.stdout), &rep)
	if rep.Backend == "native" {
		return "native", env
	}
	if testutil.Required("native") {
		t.Fatalf("EXECBOX_REQUIRE=native but execbox does not run on native: %s (%s)", rep.SelectedBecause, r.stdout)
	}
	return "local", localServe
}

// TestServeLoad: 2,000 function calls at concurrency 8 over loopback. Every
// call is answered, ok or 429; afterwards nothing is left (goroutines on
// both sides, fds, processes, work dirs, cgroups) and the audit log has one
// row per call. It runs on the default backend (native as root) or, where
// none is ready, on local.
func TestServeLoad(t *testing.T) {
	requirePython(t)
	const calls, workers = 2000, 8
	backend, env := loadBackend(t)
	s := startServer(t, append(env, "EXECBOX_FUNCTIONS_CONCURRENCY=2", "EXECBOX_FUNCTIONS_QUEUE_TIMEOUT=100ms"))
	clientGoroutines := goleak.IgnoreCurrent()
	tr := &http.Transport{MaxIdleConnsPerHost: workers}
	c, err := client.New(s.url, client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Warm up, then take the server's baseline with its pools full.
	if _, err := c.Execute(ctx, &v1.FunctionRequest{Code: "def main(): pass"}); err != nil {
		t.Fatal(err)
	}
	pooled := s.poolsSettled()
	baseG, baseFD := s.metric("go_goroutines"), s.metric("process_open_fds")

	var next, ok, busy atomic.Int64
	var failures sync.Map
	start := time.Now()
	var wg sync.WaitGroup
	// The cgroup probe must see the server's live sandboxes during the
	// load before its "nothing left" afterwards means anything.
	var seenCgroups atomic.Int64
	sampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-sampling:
				return
			case <-time.After(2 * time.Millisecond):
				seenCgroups.Store(max(seenCgroups.Load(), int64(len(cgroupsOf(t, s.cmd.Process.Pid)))))
			}
		}
	}()
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= calls; i = next.Add(1) {
				resp, err := c.Execute(ctx, &v1.FunctionRequest{Code: "def main(i):\n    return i * 2\n", Params: []byte(fmt.Sprintf(`{"i":%d}`, i))})
				var p *v1.Problem
				switch {
				case err == nil && resp.OK && string(resp.Data) == strconv.Itoa(int(i)*2):
					ok.Add(1)
				case errors.As(err, &p) && p.Status == 429 && p.Code == function.CodeBusy && p.RetryAfter >= 1:
					busy.Add(1)
				default:
					failures.Store(i, fmt.Sprintf("%+v %v", resp, err))
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(sampling)
	<-sampled
	if backend == "native" && seenCgroups.Load() == 0 {
		t.Errorf("the cgroup probe never saw a sandbox of the server's during %d calls", calls)
	}
	t.Logf("%d calls on %s in %v: %d ok, %d busy (429)", calls, backend, took.Round(time.Millisecond), ok.Load(), busy.Load())
	failures.Range(func(k, v any) bool {
		t.Errorf("call %v: %v", k, v)
		return true
	})
	if ok.Load()+busy.Load() != calls || ok.Load() == 0 {
		t.Fatalf("%d ok + %d busy != %d", ok.Load(), busy.Load(), calls)
	}

	// Server side, over /metrics: goroutines and fds back to the baseline
	// once the client's connections are closed and the pools full again
	// (the baseline had the warm-up's; the scrape holds its own both
	// times). What is left on the host is the pools' sandboxes, no more.
	tr.CloseIdleConnections()
	if n := s.poolsSettled(); n != pooled {
		t.Errorf("%d pooled sandboxes after the load, %d before", n, pooled)
	}
	var g, fd float64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		g, fd = s.metric("go_goroutines"), s.metric("process_open_fds")
		if (g <= baseG && fd <= baseFD) || time.Now().After(deadline) {
			break
		}
	}
	if g > baseG || fd > baseFD {
		t.Errorf("server: %v goroutines and %v fds after, %v and %v before", g, fd, baseG, baseFD)
	}
	// A pooled sandbox is one child (native's init, local's reaper), one
	// directory (native's work dir in its base; local's own, holding its
	// work dir and tmp, in the work root) and on native one cgroup (in each
	// v1 hierarchy); the last calls' sandboxes are removed in the
	// background, briefly.
	pid := s.cmd.Process.Pid
	wantCgroups := pooled
	if backend == "local" {
		wantCgroups = 0
	}
	var kids, dirs, cgs []string
	held := func() bool {
		n := len(dirs)
		if backend == "local" {
			n = len(distinctTop(dirs))
		}
		return len(kids) == pooled && n == pooled && len(distinctBase(cgs)) == wantCgroups
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		kids, dirs, cgs = s.children(), sandboxLeftovers(s.work, true), cgroupsOf(t, pid)
		if held() || time.Now().After(deadline) {
			break
		}
	}
	if !held() {
		t.Errorf("want the %d pooled sandboxes' alone; children %v, work dirs %v, cgroups %v", pooled, kids, dirs, cgs)
	}
	if in := s.metric(`execbox_executions_in_flight{kind="function"}`); in != 0 {
		t.Errorf("%v in flight", in)
	}
	// One audit row per call (and the warm-up), busy ones included.
	if n := s.auditCount("--kind", "function"); n != calls+1 {
		t.Errorf("%d audit rows, want %d", n, calls+1)
	}
	if n := s.auditCount("--error-code", "busy"); n != int(busy.Load()) {
		t.Errorf("%d busy rows, want %d", n, busy.Load())
	}
	if s.stop() != 0 {
		t.Errorf("exit %d", s.exitCode)
	}
	if left := append(sandboxLeftovers(s.work, false), cgroupsOf(t, pid)...); len(left) > 0 {
		t.Errorf("a stopped server left: %v", left)
	}
	// Client side: with the connections closed, no goroutine is left.
	tr.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err = goleak.Find(clientGoroutines); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Errorf("client goroutines left: %v", err)
	}
}

// TestServeDefaultBackend: with the configured (auto) backend, runs and
// function calls report real isolation. It skips where no isolated
// backend is ready, and fails then when EXECBOX_REQUIRE lists "serve".
func TestServeDefaultBackend(t *testing.T) {
	requirePython(t)
	s := startServer(t, nil)
	c := s.client("")
	ctx := context.Background()
	// /readyz answers within 5 s, "not yet" while the first probes run
	// (a loaded host, or a microVM's KVM trial): asked again, as an
	// orchestrator's readiness probe is, for up to two minutes.
	err := c.Ready(ctx)
	for deadline := time.Now().Add(2 * time.Minute); err != nil && time.Now().Before(deadline); err = c.Ready(ctx) {
		time.Sleep(time.Second)
	}
	if err != nil {
		testutil.SkipOrFail(t, "serve", "no isolated backend is ready: %v", err)
	}
	res, err := c.Run(ctx, &v1.RunRequest{Command: []string{"sh", "-c", "echo hi"}})
	if err != nil || res.Stdout != "hi\n" || res.Isolation == sandbox.IsolationNone {
		t.Fatalf("run: %+v %v", res, err)
	}
	fr, err := c.Execute(ctx, &v1.FunctionRequest{Code: "def main():\n    return 7\n"})
	if err != nil || !fr.OK || string(fr.Data) != "7" || fr.Isolation == "none" {
		t.Fatalf("function: %+v %v", fr, err)
	}
	t.Logf("ran on %s (isolation %s)", res.Backend, res.Isolation)
}
