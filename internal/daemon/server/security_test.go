package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/sandbox"
)

// The tests of issue 22, "Security of the daemon itself", finding by
// finding. Each fails on the tree before the fix.

// waitUntil polls cond for up to a minute: for what must happen, never
// for a window in which it may.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
	}
}

// metric reads one sample of the server's metrics.
func metric(t testing.TB, en *env, name string, header ...string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(scrape(t, en, header...))
	if m == nil {
		t.Fatalf("no metric %s", name)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// Finding 1: every limit has a maximum; over one is 400 naming the field,
// and nothing runs.
func TestLimitsOverTheirMaximum(t *testing.T) {
	en := newEnv(t, setup{maxima: sandbox.Limits{Memory: sandbox.GiB, Output: 16 * sandbox.MiB, ArtifactBytes: 64 * sandbox.MiB, WorkSize: sandbox.GiB}})
	for _, tc := range []struct{ limits, want string }{
		{`{"output":"300m"}`, "limits.output 300m exceeds the maximum 16m (max_limits.output)"},
		{`{"artifact_bytes":"250m"}`, "limits.artifact_bytes 250m exceeds the maximum 64m (max_limits.artifact_bytes)"},
		{`{"memory":"3g"}`, "limits.memory 3g exceeds the maximum 1g (max_limits.memory)"},
		{`{"work_size":"2g"}`, "limits.work_size 2g exceeds the maximum 1g (max_limits.work_size)"},
		{`{"work_size":"1t"}`, "limits.work_size 1t exceeds"},
		{`{"memory":9223372036854775807}`, "limits.memory 9223372036854775807 is beyond what any host allows"},
		// Finding 5: the contract's own bounds, a 400 not a 500.
		{`{"pids":2147483647}`, "limits.pids 2147483647 is beyond what any host allows (at most 4194304)"},
	} {
		a := en.do("POST", "/v1/runs", `{"command":["true"],"limits":`+tc.limits+`}`)
		if a.status != 400 {
			t.Errorf("%s: %d %s", tc.limits, a.status, a.body)
			continue
		}
		if p := a.problem(t); !strings.Contains(p.Detail, tc.want) || p.Field != "limits" || strings.Contains(p.Detail, "/sys/") {
			t.Errorf("%s: %+v, want field limits and %q", tc.limits, p, tc.want)
		}
	}
	if n := len(must(en.audit.Query(context.Background(), auditRuns()))); n != 7 {
		t.Errorf("%d run rows, want the 7 refusals", n)
	}
	if in := metric(t, en, "execbox_run_slots_in_use"); in != 0 {
		t.Errorf("refusals hold %v slots", in)
	}
}

// Finding 1: a run holds its slot and result memory until its answer is
// written: an answer the client does not read keeps them (max_runs bounds
// unread results too) until the client goes away or the write deadline
// passes.
func TestSlotHeldUntilAnswerWritten(t *testing.T) {
	en := newEnv(t, setup{maxRuns: 1, options: func(o *Options) { o.WriteTimeout = time.Hour }})
	// 16 MiB on each stream (the built-in maximum here is at least the
	// default, 1 MiB; ask what the host allows): far more than the
	// sockets buffer, so the write blocks while the client does not read.
	out := min(sandbox.HostMaxima().Output, 16*sandbox.MiB)
	body := fmt.Sprintf(`{"command":["sh","-c","yes | head -c %d; yes | head -c %d >&2"],"limits":{"output":%d}}`, out, out, out)
	conn := rawRequest(t, en, "POST", "/v1/runs", body)
	// The run ended: its audit row is written before the answer.
	waitUntil(t, "the run's audit row", func() bool { return en.auditCount() == 1 })
	if in := metric(t, en, "execbox_run_slots_in_use"); in != 1 {
		t.Fatalf("while its answer is unread the run holds %v slots, want 1", in)
	}
	if got := metric(t, en, "execbox_result_memory_reserved_bytes"); got != float64(2*out+sandbox.Defaults.ArtifactBytes) {
		t.Fatalf("reserved %v bytes of result memory, want %d", got, 2*out+sandbox.Defaults.ArtifactBytes)
	}
	a := en.do("POST", "/v1/runs", `{"command":["true"]}`)
	if a.status != 429 || a.problem(t).Code != v1.CodeBusy {
		t.Fatalf("a second run while the first answer is unread: %d %s", a.status, a.body)
	}
	// The client goes away: the write fails, the slot is free.
	conn.Close()
	waitUntil(t, "the slot freed", func() bool { return metric(t, en, "execbox_run_slots_in_use") == 0 })
	if a := en.do("POST", "/v1/runs", `{"command":["true"]}`); a.status != 200 {
		t.Fatalf("after the client left: %d %s", a.status, a.body)
	}
}

// Finding 1 and 4: an answer has a write deadline; a client that keeps
// its connection but never reads loses it, and the slot is freed.
func TestWriteDeadlineFreesTheSlot(t *testing.T) {
	en := newEnv(t, setup{maxRuns: 1, options: func(o *Options) { o.WriteTimeout = 200 * time.Millisecond }})
	out := min(sandbox.HostMaxima().Output, 16*sandbox.MiB)
	for _, path := range []string{"/v1/runs", "/v1/runs?stream=1"} {
		body := fmt.Sprintf(`{"command":["sh","-c","yes | head -c %d"],"limits":{"output":%d}}`, out, out)
		conn := rawRequest(t, en, "POST", path, body)
		defer conn.Close()
		waitUntil(t, path+": the slot freed by the write deadline", func() bool {
			return metric(t, en, "execbox_run_slots_in_use") == 0 && en.auditCount() > 0
		})
	}
}

// rawRequest sends a request on a connection of its own and never reads
// the answer.
func rawRequest(t testing.TB, en *env, method, path, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(en.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// A small receive buffer: the answer cannot hide in the socket.
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", method, path, len(body), body)
	return conn
}

// Finding 2: the DNS-rebinding request of the issue — a foreign Host, a
// foreign Origin, no Content-Type — runs nothing; each check alone refuses
// it too; same-origin requests and configured origins work.
func TestRebindingAndCrossOrigin(t *testing.T) {
	en := newEnv(t, setup{options: func(o *Options) {
		o.AllowedOrigins = []string{"https://play.example.com"}
		o.AllowedHosts = []string{"execbox.internal"}
	}})
	run := `{"command":["sh","-c","id"]}`
	self := strings.TrimPrefix(en.http.URL, "http://")
	for _, tc := range []struct {
		name   string
		header []string
		status int
		code   string
	}{
		{"the issue's request", []string{"Origin", "http://attacker.example", "Host", "rebind.attacker.example:18081", "Content-Type", ""}, 403, CodeHostNotAllowed},
		{"a rebound name, same-origin in the browser's eyes", []string{"Host", "rebind.attacker.example:18081", "Origin", "http://rebind.attacker.example:18081"}, 403, CodeHostNotAllowed},
		{"no Content-Type (fetch no-cors with a Blob)", []string{"Content-Type", ""}, 415, v1.CodeUnsupportedMedia},
		{"text/plain (a form)", []string{"Content-Type", "text/plain"}, 415, v1.CodeUnsupportedMedia},
		{"a foreign origin", []string{"Origin", "http://attacker.example"}, 403, CodeOriginNotAllowed},
		{"Origin null", []string{"Origin", "null"}, 403, CodeOriginNotAllowed},
		{"another port of this host", []string{"Origin", "http://127.0.0.1:1"}, 403, CodeOriginNotAllowed},
		{"a cross-site page without Origin", []string{"Sec-Fetch-Site", "cross-site"}, 403, CodeOriginNotAllowed},
		{"same origin", []string{"Origin", "http://" + self, "Sec-Fetch-Site", "same-origin"}, 200, ""},
		{"localhost", []string{"Host", "localhost:" + strings.Split(self, ":")[1]}, 200, ""},
		{"a configured name", []string{"Host", "EXECBOX.internal.:8080"}, 200, ""},
		{"a configured origin", []string{"Origin", "https://play.example.com", "Sec-Fetch-Site", "cross-site"}, 200, ""},
	} {
		a := en.do("POST", "/v1/runs", run, tc.header...)
		if a.status != tc.status || (tc.code != "" && a.problem(t).Code != tc.code) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, a.status, a.body, tc.status, tc.code)
		}
		if a.header.Get("X-Content-Type-Options") != "nosniff" || a.header.Get("X-Frame-Options") != "DENY" ||
			!strings.Contains(a.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s: security headers missing: %v", tc.name, a.header)
		}
		allowed := a.header.Get("Access-Control-Allow-Origin")
		if (allowed != "") != (tc.name == "a configured origin") {
			t.Errorf("%s: Access-Control-Allow-Origin %q", tc.name, allowed)
		}
	}
	// Only the four accepted requests ran; the two 415s were recorded as
	// refusals, the 403s (before any route) not at all.
	ran, refused := 0, 0
	for _, r := range must(en.audit.Query(context.Background(), auditRuns())) {
		switch {
		case r.Reason == string(sandbox.ReasonExited):
			ran++
		case r.ErrorCode == v1.CodeUnsupportedMedia:
			refused++
		}
	}
	if ran != 4 || refused != 2 {
		t.Errorf("%d runs ran and %d were refused 415, want 4 and 2", ran, refused)
	}
	// Preflights: for configured origins only.
	a := en.do("OPTIONS", "/v1/runs", nil, "Origin", "https://play.example.com", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "content-type, authorization")
	if a.status != 204 || a.header.Get("Access-Control-Allow-Origin") != "https://play.example.com" ||
		!strings.Contains(a.header.Get("Access-Control-Allow-Headers"), "Content-Type") {
		t.Errorf("preflight of a configured origin: %d %v", a.status, a.header)
	}
	a = en.do("OPTIONS", "/v1/runs", nil, "Origin", "http://attacker.example", "Access-Control-Request-Method", "POST")
	if a.status != 403 || a.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin: %d %v", a.status, a.header)
	}
	// Read-only routes of another site are refused too (a GET carries no
	// Origin, but Sec-Fetch-Site).
	if a := en.do("GET", "/v1/health", nil, "Sec-Fetch-Site", "cross-site"); a.status != 403 {
		t.Errorf("cross-site GET: %d", a.status)
	}
}

// Finding 4: a request whose body the server does not read (public
// routes, a 401) is answered at once and its connection closed, never
// held waiting for the body (the connections stayed open 150 s).
func TestUnreadBodyIsNotWaitedFor(t *testing.T) {
	en := newEnv(t, setup{tokens: []auth.Token{auth.FromSecret("s")}})
	for _, req := range []string{
		"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n",
		"POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
		"POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer wrong\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(en.http.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, req)
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		io.Copy(io.Discard, resp.Body)
		// The server closes the connection rather than wait for the body.
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%q: after a %d the connection is not closed: %v", strings.SplitN(req, "\r", 2)[0], resp.StatusCode, err)
		}
	}
}

// Finding 5: headers are capped well below 1 MiB.
func TestHeaderCap(t *testing.T) {
	_, base := serve(t, newEnv(t, setup{}))
	client := newClient(t)
	req, _ := http.NewRequest("GET", base+"/healthz", nil)
	req.Header.Set("X-Big", strings.Repeat("x", 32<<10))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("32 KiB of header: %d, want 431", resp.StatusCode)
	}
	req.Header.Set("X-Big", strings.Repeat("x", 8<<10))
	resp, err = client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("8 KiB of header: %v %v", resp, err)
	}
	resp.Body.Close()
}

// newClient is an HTTP client whose connections close when the test ends.
func newClient(t testing.TB) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// serve runs en's server with Serve (connection bounds, header cap) on a
// loopback listener until the test ends.
func serve(t testing.TB, en *env) (net.Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- en.srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		<-done
	})
	return ln, "http://" + ln.Addr().String()
}

// Finding 4: idle and unauthenticated connections, far more than the
// bound, never keep an authenticated run out: the oldest of them is closed
// for each new one; a connection serving an authenticated request is never
// closed for another.
func TestConnectionBounds(t *testing.T) {
	en := newEnv(t, setup{tokens: []auth.Token{auth.FromSecret("s")}, options: func(o *Options) {
		o.MaxConnections, o.MaxConnectionsPerAddress = 16, 8
	}})
	_, base := serve(t, en)
	addr := strings.TrimPrefix(base, "http://")
	gate := filepath.Join(t.TempDir(), "gate")
	// An authenticated streaming run that holds its connection until the
	// gate opens.
	held := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("POST", base+"/v1/runs?stream=1", strings.NewReader(
			fmt.Sprintf(`{"command":["sh","-c","echo up; while [ ! -e %s ]; do sleep 0.01; done; echo done"]}`, gate)))
		req.Header.Set("Authorization", "Bearer s")
		req.Header.Set("Content-Type", "application/json")
		resp, err := newClient(t).Do(req)
		if err != nil {
			held <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		held <- string(b)
	}()
	waitUntil(t, "the held run", func() bool { return metric(t, en, "execbox_run_slots_in_use", "Authorization", "Bearer s") == 1 })
	// 200 connections: silent, half a header, and a 401 with a body that
	// never comes.
	var idle []net.Conn
	for i := range 200 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
		switch i % 3 {
		case 1:
			io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0")
		case 2:
			io.WriteString(c, "POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n")
		}
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	// An authenticated run on a fresh connection gets through.
	c := newClient(t)
	req, _ := http.NewRequest("POST", base+"/v1/runs", strings.NewReader(`{"command":["echo","through"]}`))
	req.Header.Set("Authorization", "Bearer s")
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("an authenticated run behind 200 idle connections: %v", err)
	}
	var res v1.RunResult
	json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if resp.StatusCode != 200 || res.Stdout != "through\n" {
		t.Fatalf("%d %+v", resp.StatusCode, res)
	}
	if open := metric(t, en, "execbox_connections_open", "Authorization", "Bearer s"); open > 16 {
		t.Errorf("%v connections open, over the bound of 16", open)
	}
	if ev := metric(t, en, `execbox_connections_shed_total{reason="evicted"}`, "Authorization", "Bearer s"); ev < 100 {
		t.Errorf("%v connections evicted", ev)
	}
	// The held run was never cut off.
	touch(t, gate)
	if out := <-held; !strings.Contains(out, `"data":"done\n"`) || !strings.Contains(out, `"type":"result"`) {
		t.Fatalf("the held run: %s", out)
	}
}

// Finding 5: failed authentications are throttled per address and
// audited; requests without credentials are neither.
func TestAuthFailuresThrottled(t *testing.T) {
	en := newEnv(t, setup{tokens: []auth.Token{auth.FromSecret("s")}, authLimits: auth.Limits{FailureRate: 0.001, FailureBurst: 3}})
	for i := range 3 {
		if a := en.do("GET", "/v1/health", nil, "Authorization", "Bearer guess"+strconv.Itoa(i)); a.status != 401 {
			t.Fatalf("guess %d: %d", i, a.status)
		}
	}
	a := en.do("GET", "/v1/health", nil, "Authorization", "Bearer s")
	if a.status != 429 || a.problem(t).Code != auth.CodeAuthThrottled || a.header.Get("Retry-After") == "" {
		t.Fatalf("after 3 failures, even the right token: %d %s", a.status, a.body)
	}
	recs := must(en.audit.Query(context.Background(), auditAuth()))
	if len(recs) != 3 || recs[0].Remote != "127.0.0.1" {
		t.Fatalf("auth rows %+v, want the 3 failures", recs)
	}
	other := newEnv(t, setup{tokens: []auth.Token{auth.FromSecret("s")}, authLimits: auth.Limits{FailureRate: 0.001, FailureBurst: 3}})
	for range 10 {
		other.do("GET", "/v1/health", nil)
	}
	if a := other.do("GET", "/v1/health", nil, "Authorization", "Bearer s"); a.status != 200 {
		t.Fatalf("after 10 requests without credentials: %d %s", a.status, a.body)
	}
	if n := other.auditCount(); n != 0 {
		t.Fatalf("%d audit rows for requests without credentials", n)
	}
}

// Finding 5: a plain token sees no host details in /v1/health or
// /v1/backends (paths, versions, the cgroup layout); an admin does.
// /readyz tells anyone only a code.
func TestHealthRedacted(t *testing.T) {
	user, _ := auth.ParseToken("user:" + auth.HashSecret("u"))
	en := newEnv(t, setup{tokens: []auth.Token{user, auth.FromSecret("admin")}})
	path := regexp.MustCompile(`(^|[\s"(=:])/[a-z]`)
	for _, route := range []string{"/v1/health", "/v1/backends"} {
		a := en.do("GET", route, nil, "Authorization", "Bearer u")
		if a.status != 200 || path.Match(a.body) || strings.Contains(string(a.body), `"details"`) || strings.Contains(string(a.body), "rlimit") {
			t.Errorf("%s for a plain token: %d %s", route, a.status, a.body)
		}
	}
	a := en.do("GET", "/v1/health", nil, "Authorization", "Bearer admin")
	if a.status != 200 || !strings.Contains(string(a.body), "rlimit") {
		t.Errorf("/v1/health for an admin: %d %s", a.status, a.body)
	}
	off := newEnv(t, setup{engineOff: true})
	a = off.do("GET", "/readyz", nil)
	if st := decode[v1.Status](t, a); a.status != 503 || strings.Contains(st.Reason, "execution is turned off") || !strings.Contains(st.Reason, "backend_off") {
		t.Errorf("/readyz: %d %s", a.status, a.body)
	}
}

// Finding 5: an internal error's detail never shows the host; the log
// has it.
func TestInternalErrorsShowNoHostPaths(t *testing.T) {
	en := newEnv(t, setup{backends: []string{"t-failing"}})
	a := en.do("POST", "/v1/runs", `{"command":["true"],"backend":"t-failing"}`)
	if a.status != 500 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	if p := a.problem(t); strings.Contains(p.Detail, "/sys/fs/cgroup") || !strings.Contains(p.Detail, p.RequestID) {
		t.Errorf("problem %+v", p)
	}
	if !strings.Contains(en.logs.String(), "/sys/fs/cgroup/execbox") {
		t.Errorf("the log lacks the real error:\n%s", en.logs)
	}
	if got := redactPaths(`creating cgroup: writing /sys/fs/cgroup/x/pids.max: invalid; runsc at "/usr/local/bin/runsc" (unix:///run/d.sock), 1/2`); got !=
		`creating cgroup: writing <path>: invalid; runsc at "<path>" (unix:<path>), 1/2` {
		t.Errorf("redactPaths: %s", got)
	}
}

// failing is a backend whose Create fails the way issue 22's pids
// 2147483647 did: an internal error naming a host path.
type failing struct{}

func (failing) Name() string { return "t-failing" }
func (failing) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: sandbox.IsolationNone}
}
func (failing) Health(context.Context) sandbox.Health {
	return sandbox.Health{Available: true, Ready: true}
}
func (failing) Create(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, sandbox.Errorf(sandbox.ErrInternal, "cgroup_failed",
		"creating cgroup: writing /sys/fs/cgroup/execbox/execbox-4242-ab/pids.max: invalid argument")
}

func init() {
	sandbox.Register(sandbox.Registration{Name: "t-failing", New: func(sandbox.Settings) (sandbox.Backend, error) { return failing{}, nil }})
}

// Finding 5: JSON is decoded strictly — keys exactly as named, none
// twice, in the run request and the function request alike.
func TestStrictJSON(t *testing.T) {
	en := newEnv(t, setup{})
	for _, tc := range []struct{ path, body, field, want string }{
		{"/v1/runs", `{"Command":["true"]}`, "Command", "did you mean command"},
		{"/v1/runs", `{"command":["false"],"command":["true"]}`, "command", "given twice"},
		{"/v1/runs", `{"command":["true"],"limits":{"wall":1,"wall":100}}`, "limits.wall", "given twice"},
		{"/v1/runs", `{"command":["true"],"limits":{"Memory":"1g"}}`, "limits.Memory", "did you mean memory"},
		{"/v1/runs", `{"command":["true"],"env":{"A":"1","A":"2"}}`, "env.A", "given twice"},
		{"/v1/runs", `{"command":["true"],"stdin":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, "stdin", "nested more than"},
		{"/v1/functions:execute", `{"code":"def main(): pass","CODE":"x"}`, "CODE", "did you mean code"},
		{"/v1/functions:execute", `{"code":"def main(): pass","params":{"a":1,"a":2}}`, "params.a", "given twice"},
	} {
		a := en.do("POST", tc.path, tc.body)
		if a.status != 400 {
			t.Errorf("%s: %d %s", tc.body, a.status, a.body)
			continue
		}
		if p := a.problem(t); p.Field != tc.field || !strings.Contains(p.Detail, tc.want) {
			t.Errorf("%s: %+v, want field %q and %q", tc.body, p, tc.field, tc.want)
		}
	}
}

// Finding 5: code_sha256 covers the whole request, files and stdin
// included.
func TestAuditHashCoversTheRequest(t *testing.T) {
	en := newEnv(t, setup{})
	for _, body := range []string{
		`{"command":["cat","f"],"files":{"f":"YQ=="}}`,
		`{"command":["cat","f"],"files":{"f":"Yg=="}}`,
		`{"command":["cat","f"],"files":{"f":"YQ=="},"stdin":"x"}`,
		`{"command":["cat","f"],"files":{"f":"YQ=="},"env":{"A":"1"}}`,
	} {
		if a := en.do("POST", "/v1/runs", body); a.status != 200 {
			t.Fatalf("%s: %d %s", body, a.status, a.body)
		}
	}
	recs := must(en.audit.Query(context.Background(), auditRuns()))
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[r.CodeSHA256] {
			t.Fatalf("two different requests share code_sha256 %s", r.CodeSHA256)
		}
		seen[r.CodeSHA256] = true
	}
}

func must[T any](v T, _ int, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
