package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/daemon/guard"
)

// The tests of issue 33, "Trust first": an attacker's run against
// `execbox serve`, finding by finding. Each fails on the tree before the
// fix.

// dial opens a connection of its own to base (en.http.URL or Serve's),
// closed when the test ends.
func dial(t testing.TB, base string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// send writes a request's head (Content-Length n) and the first bytes of
// its body on c, and leaves the rest to the caller.
func send(t testing.TB, c net.Conn, method, path string, n int, header []string, first string) {
	t.Helper()
	var h strings.Builder
	fmt.Fprintf(&h, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n", method, path, n)
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(&h, "%s: %s\r\n", header[i], header[i+1])
	}
	if _, err := io.WriteString(c, h.String()+"\r\n"+first); err != nil {
		t.Fatal(err)
	}
}

// answerOn reads the answer to what on c, waiting at most within (for
// what must come, never to time it), and its problem if it is one.
func answerOn(t testing.TB, c net.Conn, within time.Duration, what string) (int, v1.Problem) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s: no answer within %s: %v", what, within, err)
	}
	defer resp.Body.Close()
	var p v1.Problem
	json.NewDecoder(resp.Body).Decode(&p)
	return resp.StatusCode, p
}

// trickle writes n bytes of b's on c, one every gap, until c fails; done
// is closed when it stops.
func trickle(c net.Conn, n int, gap time.Duration) (done chan struct{}) {
	done = make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			if _, err := c.Write([]byte("b")); err != nil {
				return
			}
			time.Sleep(gap)
		}
	}()
	return done
}

// refusedWith reports whether a is a problem of status and code whose
// detail holds each of details.
func refusedWith(t testing.TB, a answer, status int, code string, details ...string) bool {
	t.Helper()
	if a.status != status {
		return false
	}
	p := a.problem(t)
	for _, d := range details {
		if !strings.Contains(p.Detail, d) {
			return false
		}
	}
	return p.Code == code
}

// newSession makes a session for token ("" without tokens) and returns
// its id.
func newSession(t testing.TB, en *env, token string) string {
	t.Helper()
	var h []string
	if token != "" {
		h = []string{"Authorization", "Bearer " + token}
	}
	a := en.do("POST", "/v1/sessions", `{}`, h...)
	if a.status != http.StatusCreated {
		t.Fatalf("a session: %d %s", a.status, a.body)
	}
	return decode[v1.Session](t, a).ID
}

// partWithHeaders is a part of an upload named name whose headers are
// size bytes as the server counts them (each field's name, ": ", value
// and CRLF); an upload is parts and then "--B--\r\n".
func partWithHeaders(name string, size int) string {
	cd := `Content-Disposition: form-data; name="f"; filename="` + name + "\"\r\n"
	pad := size - len(cd) - len("X-Pad: \r\n")
	return "--B\r\n" + cd + "X-Pad: " + strings.Repeat("p", pad) + "\r\n\r\ncontent of " + name + "\r\n"
}

const multipartB = "multipart/form-data; boundary=B"

// Finding 4: a part's headers are bounded (maxPartHeader, as parsed) on
// both sides, in any part; a part whose headers keep coming is refused
// once the bound is passed, not after Go's reader has buffered 10 MiB of
// them: the answer comes while the sender is still sending.
func TestUploadPartHeaders(t *testing.T) {
	en := newEnv(t, setup{options: func(o *Options) { o.BodyTimeout = 2 * time.Minute }})
	id := newSession(t, en, "")
	upload := func(body string) answer {
		return en.do("POST", "/v1/sessions/"+id+"/upload", []byte(body), "Content-Type", multipartB)
	}
	const end = "--B--\r\n"
	if a := upload(partWithHeaders("at.txt", maxPartHeader) + end); a.status != http.StatusCreated {
		t.Fatalf("a part's headers at the bound: %d %s", a.status, a.body)
	}
	a := upload(partWithHeaders("past.txt", maxPartHeader+1) + end)
	if !refusedWith(t, a, http.StatusRequestEntityTooLarge, CodePartHeaderTooLarge, "part 1") {
		t.Fatalf("a part's headers one byte past the bound: %d %s", a.status, a.body)
	}
	// The second part: at the bound, and past it (the first stays written).
	second := func(size int) string { return partWithHeaders("one.txt", 100) + partWithHeaders("two.txt", size) + end }
	if a := upload(second(maxPartHeader)); a.status != http.StatusCreated || len(decode[v1.Uploaded](t, a).Files) != 2 {
		t.Fatalf("a second part's headers at the bound: %d %s", a.status, a.body)
	}
	a = upload(second(maxPartHeader + 1))
	if !refusedWith(t, a, http.StatusRequestEntityTooLarge, CodePartHeaderTooLarge, "part 2") {
		t.Fatalf("a second part's headers past the bound: %d %s", a.status, a.body)
	}
	for _, f := range []string{"at.txt", "one.txt", "two.txt"} {
		if a := en.do("GET", "/v1/sessions/"+id+"/stat/"+f, nil); a.status != 200 {
			t.Errorf("%s: %d %s", f, a.status, a.body)
		}
	}
	if a := en.do("GET", "/v1/sessions/"+id+"/stat/past.txt", nil); a.status != http.StatusNotFound {
		t.Errorf("the refused part left a file: %d %s", a.status, a.body)
	}

	// The upload: 9 MiB of one header. 64 KiB of it are sent, and
	// then nothing: the answer must not wait for the rest.
	c := dial(t, en.http.URL)
	head := "--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"big\"\r\nX-Pad: "
	send(t, c, "POST", "/v1/sessions/"+id+"/upload", len(head)+9<<20, []string{"Content-Type", multipartB}, head+strings.Repeat("p", 64<<10))
	status, p := answerOn(t, c, 30*time.Second, "9 MiB of a part's headers")
	if status != http.StatusRequestEntityTooLarge || p.Code != CodePartHeaderTooLarge {
		t.Fatalf("9 MiB of a part's headers: %d %+v", status, p)
	}
	// The refusals are audited.
	rows := must(en.audit.Query(context.Background(), audit.Query{Operation: string(v1.OpSessionUpload), ErrorCode: CodePartHeaderTooLarge, Limit: 10}))
	if len(rows) != 3 || rows[0].Session != id {
		t.Errorf("%d rows of refused headers, want 3: %+v", len(rows), rows)
	}
}

// holdUpload starts an upload (PUT, or a multipart upload when multi is
// set) whose body stops coming, so that it holds its upload slot until
// the connection closes.
func holdUpload(t testing.TB, en *env, token, session string, multi bool) net.Conn {
	t.Helper()
	c := dial(t, en.http.URL)
	h := []string{"Authorization", "Bearer " + token}
	if multi {
		send(t, c, "POST", "/v1/sessions/"+session+"/upload", 1000, append(h, "Content-Type", multipartB),
			"--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"held-multipart\"\r\n\r\nx")
	} else {
		send(t, c, "PUT", "/v1/sessions/"+session+"/files/held-put", 1000, h, "x")
	}
	return c
}

// Finding 4: uploads streaming in at once are bounded in all
// (server.max_uploads), per token (max_uploads_per_token) and with slots
// kept for admin tokens (admin_uploads), PUT and multipart alike, each
// bound accepted at it and refused past it, 429 too_many_uploads naming
// its key.
func TestUploadShares(t *testing.T) {
	en := newEnv(t, setup{
		tokens: []auth.Token{tokenFor("alice", "a", false), tokenFor("bob", "b", false), tokenFor("root", "r", true)},
		options: func(o *Options) {
			o.MaxUploads, o.AdminUploads = 4, 1 // 2 a plain token
			o.BodyTimeout = time.Minute         // the held uploads are not cut meanwhile
		}})
	sess := map[string]string{}
	for _, tok := range []string{"a", "b", "r"} {
		sess[tok] = newSession(t, en, tok)
	}
	inProgress := func(n float64) {
		t.Helper()
		waitUntil(t, fmt.Sprintf("%v uploads in progress", n), func() bool {
			return metric(t, en, "execbox_uploads_in_progress", "Authorization", "Bearer r") == n
		})
	}
	put := func(tok string) answer {
		return en.do("PUT", "/v1/sessions/"+sess[tok]+"/files/f", "x", "Authorization", "Bearer "+tok, "Content-Type", "")
	}
	refused := func(what string, a answer, key string) {
		t.Helper()
		if !refusedWith(t, a, http.StatusTooManyRequests, CodeTooManyUploads, key) || a.header.Get("Retry-After") == "" {
			t.Fatalf("%s: %d %s, want 429 %s naming %s", what, a.status, a.body, CodeTooManyUploads, key)
		}
	}
	var held []net.Conn
	held = append(held, holdUpload(t, en, "a", sess["a"], false))
	inProgress(1)
	held = append(held, holdUpload(t, en, "a", sess["a"], true)) // alice's share: 2
	inProgress(2)
	refused("alice's third", put("a"), "server.max_uploads_per_token")
	held = append(held, holdUpload(t, en, "b", sess["b"], false)) // 3 = 4 − the admin's 1
	inProgress(3)
	refused("bob's second, into the admin's slot", put("b"), "server.admin_uploads")
	if a := put("r"); a.status != http.StatusCreated {
		t.Fatalf("the admin's upload into its slot: %d %s", a.status, a.body)
	}
	held = append(held, holdUpload(t, en, "r", sess["r"], false))
	inProgress(4)
	refused("an upload past every slot", put("r"), "server.max_uploads")
	// Alice's held uploads end: she may upload again.
	held[0].Close()
	held[1].Close()
	inProgress(2)
	if a := put("a"); a.status != http.StatusCreated {
		t.Fatalf("alice once her uploads ended: %d %s", a.status, a.body)
	}
	// Every refusal left its audit row.
	rows := must(en.audit.Query(context.Background(), audit.Query{ErrorCode: CodeTooManyUploads, Limit: 10}))
	if len(rows) != 3 {
		t.Errorf("%d audit rows of refused uploads, want 3", len(rows))
	}
}

// Finding 7: a body that comes slower than the minimum rate is cut with
// 408 body_timeout — a file PUT's and a multipart upload's once a window
// (BodyTimeout) of waiting brings less than MinBodyRate × BodyTimeout
// bytes, terminal input once BodyTimeout passes — on a server without
// tokens, which needs no credentials; one that comes fast enough is
// taken. (The were open after 76 s at 1 B/s.)
func TestSlowBodiesCut(t *testing.T) {
	requirePython(t)
	en := newEnv(t, setup{options: func(o *Options) { o.BodyTimeout = 2 * time.Second }}) // 8 KiB per 2 s of waiting
	id := newSession(t, en, "")
	a := en.do("POST", "/v1/sessions/"+id+"/terminals", map[string]any{"command": []string{"cat"}})
	if a.status != http.StatusCreated {
		t.Fatalf("a terminal: %d %s", a.status, a.body)
	}
	term := decode[v1.Terminal](t, a).ID
	for _, tc := range []struct {
		name, method, path, first string
		header                    []string
		detail                    string
	}{
		{"a file PUT", "PUT", "/files/slow", "", nil, "server.min_body_rate"},
		{"a multipart upload", "POST", "/upload", "--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"slow\"\r\n\r\n",
			[]string{"Content-Type", multipartB}, "server.min_body_rate"},
		{"terminal input", "POST", "/terminals/" + term + "/input", "", nil, "took longer than 2s"},
	} {
		c := dial(t, en.http.URL)
		send(t, c, tc.method, "/v1/sessions/"+id+tc.path, len(tc.first)+1000, tc.header, tc.first)
		done := trickle(c, 1000, 100*time.Millisecond) // 10 B/s
		status, p := answerOn(t, c, 30*time.Second, tc.name+" at 10 B/s")
		if status != http.StatusRequestTimeout || p.Code != v1.CodeBodyTimeout || !strings.Contains(p.Detail, tc.detail) {
			t.Errorf("%s at 10 B/s: %d %+v, want 408 body_timeout saying %q", tc.name, status, p, tc.detail)
		}
		c.Close()
		<-done
	}
	// 8 KiB every 250 ms (32 KiB/s, 8 × the minimum) is taken, for 4 s
	// (two windows); terminal input of 4 KiB in 8 pieces too.
	for _, tc := range []struct {
		name, path  string
		size, piece int
		want        int
	}{
		{"a file PUT", "/files/fast", 128 << 10, 8 << 10, http.StatusCreated},
		{"terminal input", "/terminals/" + term + "/input", 4 << 10, 512, http.StatusNoContent},
	} {
		c := dial(t, en.http.URL)
		method := "PUT"
		if tc.want == http.StatusNoContent {
			method = "POST"
		}
		send(t, c, method, "/v1/sessions/"+id+tc.path, tc.size, nil, "")
		for range tc.size / tc.piece {
			if _, err := c.Write(make([]byte, tc.piece)); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			time.Sleep(250 * time.Millisecond * time.Duration(tc.piece) / (8 << 10))
		}
		if status, p := answerOn(t, c, 30*time.Second, tc.name+" at 8 × the minimum rate"); status != tc.want {
			t.Errorf("%s at 8 × the minimum rate: %d %+v", tc.name, status, p)
		}
	}
}

// busyConns is how many of the connections Serve counts are serving an
// authenticated request.
func busyConns(en *env) int {
	l := en.srv.conns.Load()
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for c := range l.conns {
		if c.busy.Load() > 0 {
			n++
		}
	}
	return n
}

// Finding 7: at the connection bound, a request whose body trickles in no
// longer shields its connection: on a server without tokens every request
// is authenticated, and four trickling bodies kept everyone out. The
// oldest trickling one is closed for a new connection; a request whose
// body comes on pace, and one whose body is in (a run, though its body
// came slowly), never are.
func TestSlowBodyEvictable(t *testing.T) {
	en := newEnv(t, setup{options: func(o *Options) {
		o.MaxConnections, o.MaxConnectionsPerAddress = 4, 4
		o.BodyTimeout = time.Minute // no cut: eviction alone
	}})
	_, base := serve(t, en)
	gate := filepath.Join(t.TempDir(), "gate")
	// A run that holds its connection until the gate opens. Its body came
	// slowly (a pause of 1.5 s, behind the minimum rate), but it is in.
	run := fmt.Sprintf(`{"command":["sh","-c","while [ ! -e %s ]; do sleep 0.01; done; echo done"],"limits":{"wall":60}}`, gate)
	hc := dial(t, base)
	send(t, hc, "POST", "/v1/runs?stream=1", len(run), []string{"Content-Type", "application/json"}, run[:10])
	time.Sleep(1500 * time.Millisecond)
	io.WriteString(hc, run[10:])
	held := make(chan string, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(hc), nil)
		if err != nil {
			held <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		held <- string(b)
	}()
	c := newClient(t)
	waitUntil(t, "the held run", func() bool {
		resp, err := c.Get(base + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(b), "\nexecbox_run_slots_in_use 1\n")
	})
	resp, err := c.Post(base+"/v1/sessions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var sess v1.Session
	json.NewDecoder(resp.Body).Decode(&sess)
	resp.Body.Close()
	c.CloseIdleConnections()

	// A PUT on pace (16 KiB every 100 ms, until told to finish: then the
	// rest at once) and two at 5 B/s.
	fast := dial(t, base)
	const size, piece = 16 << 20, 16 << 10
	send(t, fast, "PUT", "/v1/sessions/"+sess.ID+"/files/fast", size, nil, "")
	finish, fastDone := make(chan struct{}), make(chan error, 1)
	go func() {
		sent := 0
		for ; sent < size; sent += piece {
			select {
			case <-finish:
				_, err := fast.Write(make([]byte, size-sent))
				fastDone <- err
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := fast.Write(make([]byte, piece)); err != nil {
				fastDone <- err
				return
			}
		}
		fastDone <- fmt.Errorf("all %d bytes sent on pace before the test ended", size)
	}()
	var slow []net.Conn
	for i := range 2 {
		s := dial(t, base)
		send(t, s, "PUT", fmt.Sprintf("/v1/sessions/%s/files/slow%d", sess.ID, i), 1000, nil, "")
		trickle(s, 1000, 200*time.Millisecond)
		slow = append(slow, s)
	}
	waitUntil(t, "four connections serving requests", func() bool {
		select {
		case out := <-held:
			t.Fatalf("the held run's connection was closed: %q", out)
		default:
		}
		return busyConns(en) == 4
	})

	// New runs get through, each closing a trickling connection (once it
	// has fallen behind), then an idle one.
	for i := range 3 {
		waitUntil(t, fmt.Sprintf("run %d behind the trickling bodies", i), func() bool {
			select {
			case err := <-fastDone:
				t.Fatalf("the PUT on pace ended before the runs got through: %v", err)
			default:
			}
			// Its connection stays, idle: the next run closes another.
			resp, err := newClient(t).Post(base+"/v1/runs", "application/json", strings.NewReader(`{"command":["echo","through"]}`))
			if err != nil {
				return false
			}
			var res v1.RunResult
			json.NewDecoder(resp.Body).Decode(&res)
			resp.Body.Close()
			return resp.StatusCode == 200 && res.Stdout == "through\n"
		})
	}
	for i, s := range slow {
		s.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := s.Read(make([]byte, 1))
		if ne, ok := err.(net.Error); n > 0 || err == nil || ok && ne.Timeout() {
			t.Errorf("trickling connection %d was not closed: %d, %v", i, n, err)
		}
	}
	close(finish)
	if err := <-fastDone; err != nil {
		t.Fatalf("the PUT on pace was cut: %v", err)
	}
	if status, p := answerOn(t, fast, 30*time.Second, "the PUT on pace"); status != http.StatusCreated {
		t.Fatalf("the PUT on pace: %d %+v", status, p)
	}
	touch(t, gate)
	if out := <-held; !strings.Contains(out, `"data":"done\n"`) {
		t.Fatalf("the held run: %s", out)
	}
}

// Finding 8: event streams have per-token shares and slots kept for
// admin tokens, as runs do: one token's streams never keep an admin out.
// Each bound is taken at it and refused past it.
func TestEventStreamShares(t *testing.T) {
	user1, _ := auth.ParseToken("user1:" + auth.HashSecret("u1"))
	user2, _ := auth.ParseToken("user2:" + auth.HashSecret("u2"))
	tokens := []auth.Token{user1, user2, auth.FromSecret("admin-secret")}
	refused := func(en *env, what, token, key string) {
		t.Helper()
		req, _ := http.NewRequest("GET", en.http.URL+"/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := en.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("%s: a stream opened, want 429 naming %s", what, key)
		}
		b, _ := io.ReadAll(resp.Body)
		if a := (answer{resp.StatusCode, resp.Header, b}); !refusedWith(t, a, http.StatusTooManyRequests, v1.CodeBusy, key) {
			t.Fatalf("%s: %d %s, want 429 naming %s", what, a.status, a.body, key)
		}
	}
	// The issue's: one token opens all it can; the admin still gets one.
	en := newEnv(t, setup{tokens: tokens, options: func(o *Options) { o.AdminEventStreams = 1 }}) // 64, 32 a token
	for range 32 {
		en.sse(t, "u1", "")
	}
	refused(en, "user1's 33rd", "u1", "events.max_streams_per_token")
	en.sse(t, "admin-secret", "")

	en = newEnv(t, setup{tokens: tokens, options: func(o *Options) { o.MaxEventStreams, o.AdminEventStreams = 4, 1 }}) // 2 a token
	en.sse(t, "u1", "")
	en.sse(t, "u1", "")
	refused(en, "user1's third", "u1", "events.max_streams_per_token")
	en.sse(t, "u2", "") // 3 = 4 − the admin's 1
	refused(en, "user2's second, into the admin's slot", "u2", "events.admin_streams")
	en.sse(t, "admin-secret", "")
	refused(en, "a fifth stream", "admin-secret", "events.max_streams")
}

// Finding 6: typing into a terminal is running code: it passes the guard
// and the token's budgets as the terminal's operation (session_terminal,
// language command), refused with the same codes as any execution — the
// issue's 20 s CPU loop ran after the budget had answered 429.
// Finding 9: its audit row names the session, the terminal and the
// input's size and SHA-256, never the input.
func TestTerminalInputGuarded(t *testing.T) {
	requirePython(t)
	en := guardEnv(t, guard.Config{Budgets: []guard.Budget{{Name: "typing", Tokens: []string{"user"}, Window: time.Hour, Executions: 3}}}, auth.Limits{})
	user := []string{"Authorization", asUser}
	id := newSession(t, en, "user-secret")                                                                   // 1
	a := en.do("POST", "/v1/sessions/"+id+"/terminals", map[string]any{"command": []string{"cat"}}, user...) // 2
	if a.status != http.StatusCreated {
		t.Fatalf("a terminal: %d %s", a.status, a.body)
	}
	term := decode[v1.Terminal](t, a).ID
	input := "/v1/sessions/" + id + "/terminals/" + term + "/input"
	// Typing goes on with the terminal's execution: it is checked against
	// the budget, not counted (the typing a terminal needs would spend an
	// executions budget in minutes).
	for i := range 3 {
		if a := en.do("POST", input, "secret input\n", user...); a.status != http.StatusNoContent {
			t.Fatalf("input %d within the budget's 3 executions (2 spent): %d %s", i, a.status, a.body)
		}
	}
	if a := en.do("POST", "/v1/runs", map[string]any{"command": []string{"true"}}, user...); a.status != 200 { // 3
		t.Fatalf("the budget's last execution, after 3 inputs: %d %s", a.status, a.body)
	}
	a = en.do("POST", input, "while :; do :; done\n", user...)
	if !refusedWith(t, a, http.StatusTooManyRequests, guard.CodeBudgetExhausted) || a.header.Get("Retry-After") == "" {
		t.Fatalf("input past the budget: %d %s", a.status, a.body)
	}
	rows := must(en.audit.Query(context.Background(), audit.Query{Operation: string(v1.OpSessionTerminal), Session: id, Limit: 10}))
	if len(rows) != 5 {
		t.Fatalf("%d session_terminal rows, want the terminal and 4 inputs", len(rows))
	}
	sum := sha256.Sum256([]byte("secret input\n"))
	for i, r := range rows[:4] { // newest first: the refused input, then 3 typed
		if r.Terminal != term || r.Session != id || len(r.Inputs) != 1 || r.Inputs[0].Path != "" || r.Code != "" || r.CodeSHA256 == "" {
			t.Errorf("input row %d: %+v", i, r)
		}
		if i > 0 && (r.Reason != "input" || r.Inputs[0] != (audit.Input{Size: 13, SHA256: hex.EncodeToString(sum[:])})) {
			t.Errorf("typed input row %d: %+v", i, r)
		}
	}
	if rows[0].ErrorCode != guard.CodeBudgetExhausted || rows[0].Inputs[0].Size != 20 {
		t.Errorf("the refused input's row: %+v", rows[0])
	}

	// A CPU budget spent by a run refuses the next input.
	cpuTok, _ := auth.ParseToken("cpu:" + auth.HashSecret("cpu-secret"))
	g, err := guard.New(guard.Config{Budgets: []guard.Budget{{Name: "cpu", Window: time.Hour, CPU: 50 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	en = newEnv(t, setup{tokens: []auth.Token{cpuTok}, options: func(o *Options) { o.Guard = g }})
	c, err := client.New(en.http.URL, client.WithToken("cpu-secret"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := c.CreateSession(ctx, &v1.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := c.OpenTerminal(ctx, s.ID, &v1.TerminalRequest{Command: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.TerminalInput(ctx, s.ID, tm.ID, []byte("within the budget\n")); err != nil {
		t.Fatalf("input within the CPU budget: %v", err)
	}
	if res, err := c.Run(ctx, &v1.RunRequest{Code: "import time\nt = time.time()\nwhile time.time() - t < 0.3: pass"}); err != nil || res.Usage.CPU < 50*time.Millisecond {
		t.Fatalf("a run spending the CPU budget: %+v, %v", res, err)
	}
	err = c.TerminalInput(ctx, s.ID, tm.ID, []byte("while :; do :; done\n"))
	wantProblem(t, "input once a run spent the CPU budget", err, http.StatusTooManyRequests, guard.CodeBudgetExhausted)
}

// Finding 9: an upload's audit row names the session and each file it
// wrote, by path, size and SHA-256 — PUT and multipart alike, and the
// files written before a failing part.
func TestUploadAudited(t *testing.T) {
	en, cs := sessionEnv(t)
	c := cs["alice"]
	ctx := context.Background()
	id := newSession(t, en, "a")
	if _, err := c.PutFile(ctx, id, "d/put.bin", strings.NewReader("put content")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upload(ctx, id, "up", client.UploadFile{Path: "a", Content: strings.NewReader("alpha")},
		client.UploadFile{Path: "b/c", Content: strings.NewReader("")}); err != nil {
		t.Fatal(err)
	}
	bad := partWithHeaders("ok.txt", 100) + "--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"../x\"\r\n\r\nx\r\n--B--\r\n"
	if a := en.do("POST", "/v1/sessions/"+id+"/upload", []byte(bad), "Content-Type", multipartB, "Authorization", "Bearer a"); a.status != http.StatusBadRequest {
		t.Fatalf("an upload with a bad second part: %d %s", a.status, a.body)
	}
	rows := must(en.audit.Query(ctx, audit.Query{Operation: string(v1.OpSessionUpload), Session: id, Limit: 10}))
	if len(rows) != 3 {
		t.Fatalf("%d upload rows, want 3", len(rows))
	}
	in := func(path, content string) audit.Input {
		sum := sha256.Sum256([]byte(content))
		return audit.Input{Path: path, Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
	}
	for i, want := range []struct {
		code   string
		inputs []audit.Input
	}{
		{"path_invalid", []audit.Input{in("ok.txt", "content of ok.txt")}},
		{"", []audit.Input{in("up/a", "alpha"), in("up/b/c", "")}},
		{"", []audit.Input{in("d/put.bin", "put content")}},
	} {
		r := rows[i]
		if r.ErrorCode != want.code || r.Token != "alice" || r.Session != id || r.Backend != "local" || fmt.Sprint(r.Inputs) != fmt.Sprint(want.inputs) || r.Code != "" {
			t.Errorf("upload row %d: %+v, want error %q and inputs %+v", i, r, want.code, want.inputs)
		}
	}
	// The API lists them: the session's creation and the three uploads.
	out, err := cs["root"].Audit(ctx, v1.AuditQuery{Session: id})
	if err != nil || out.Total != 4 || len(out.Records[0].Inputs) != 1 || out.Records[0].Inputs[0] != v1.AuditInput(in("ok.txt", "content of ok.txt")) {
		t.Errorf("GET /v1/audit: %+v, %v", out, err)
	}
}

// shares holds its bounds under concurrent takers: never more than max,
// never more than the share of one token.
func TestSharesConcurrent(t *testing.T) {
	s := newShares("things", "busy", 8, 3, 2, "max", "per_token", "admin")
	var mu sync.Mutex
	held, byTok, worst, worstTok := 0, map[string]int{}, 0, 0
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			o := engine.Owner{Name: fmt.Sprintf("token%d", i%4), Privileged: i%4 == 0}
			release, err := s.take(o)
			if err != nil {
				return
			}
			mu.Lock()
			held++
			byTok[o.Name]++
			worst = max(worst, held)
			if !o.Privileged {
				worstTok = max(worstTok, byTok[o.Name])
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			held--
			byTok[o.Name]--
			mu.Unlock()
			release()
			release() // twice: no effect
		})
	}
	wg.Wait()
	if worst > 8 || worstTok > 3 || s.held() != 0 {
		t.Fatalf("held at most %d (max 8), %d of one token (share 3), %d left", worst, worstTok, s.held())
	}
}
