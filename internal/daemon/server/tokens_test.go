package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/internal/daemon/auth"
)

// intrusion is what token B sends to one route of token A's session: its
// path parameters and body. Routes the table does not know (added later)
// get the defaults, and are tried all the same.
type intrusion struct {
	path        string // {path...}; "" = "secret.txt"
	body        string // "" = "{}"
	contentType string // "" = application/json
}

// intrusions are bodies that would change A's session, were they let
// through: each leaves a trace the test looks for afterwards.
var intrusions = map[string]intrusion{
	"POST /v1/sessions/{id}/exec":                           {body: `{"command":["sh","-c","echo pwned > pwned.txt"]}`},
	"PUT /v1/sessions/{id}/files/{path...}":                 {body: "overwritten by bob", contentType: "application/octet-stream"},
	"POST /v1/sessions/{id}/mkdir/{path...}":                {path: "bobdir"},
	"POST /v1/sessions/{id}/upload/{path...}":               {path: "bobdir"},
	"POST /v1/sessions/{id}/contexts/{context_id}/run":      {body: `{"code":"k = 0"}`},
	"POST /v1/sessions/{id}/terminals":                      {body: `{"command":["sh","-c","echo pwned > pwned.txt"]}`},
	"POST /v1/sessions/{id}/terminals/{terminal_id}/input":  {body: "echo BOB-$((2+2))\n", contentType: "application/octet-stream"},
	"POST /v1/sessions/{id}/terminals/{terminal_id}/resize": {body: `{"rows":33,"cols":77}`},
	"POST /v1/sessions/{id}/contexts":                       {body: `{"language":"python"}`},
	"POST /v1/sessions/{id}/upload":                         {},
	"POST /v1/sessions/{id}/contexts/{context_id}/reset":    {},
	"GET /v1/sessions/{id}/terminals/{terminal_id}/output":  {},
	"DELETE /v1/sessions/{id}/terminals/{terminal_id}":      {},
	"DELETE /v1/sessions/{id}/contexts/{context_id}":        {},
	"DELETE /v1/sessions/{id}/files/{path...}":              {},
	"DELETE /v1/sessions/{id}":                              {},
	"GET /v1/sessions/{id}/files/{path...}":                 {},
	"GET /v1/sessions/{id}/stat/{path...}":                  {},
	"GET /v1/sessions/{id}/list/{path...}":                  {path: "."},
	"GET /v1/sessions/{id}/terminals/{terminal_id}":         {},
	"GET /v1/sessions/{id}/terminals":                       {},
	"GET /v1/sessions/{id}/contexts":                        {},
	"GET /v1/sessions/{id}/list":                            {},
	"GET /v1/sessions/{id}":                                 {},
}

// uploadBody is a multipart upload of one file, bob.txt.
func uploadBody(t *testing.T) (string, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	part, err := mw.CreateFormFile("file", "bob.txt")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(part, "bob was here")
	mw.Close()
	return b.String(), mw.FormDataContentType()
}

// probe sends one request as secret and answers its status and, unless it
// is a stream (which a refusal never is), its body.
func (en *env) probe(t *testing.T, secret, method, path, body, contentType string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rd io.Reader
	if method != "GET" && method != "DELETE" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, en.http.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	if rd != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := en.http.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		a.body, _ = io.ReadAll(resp.Body)
	}
	return a
}

// TestSecondTokenSeesNoSession walks the server's own route table: token
// B tries every route of token A's session — files, execs, contexts,
// terminals, uploads, the session itself — and each answers 404
// session_not_found exactly as for a session that never existed; A's
// session is untouched after (its files, context state, terminal input
// and size), and B's event stream filtered on A's session carries none of
// A's events.
func TestSecondTokenSeesNoSession(t *testing.T) {
	requirePython(t)
	en := newEnv(t, setup{tokens: []auth.Token{tokenFor("alice", "a", false), tokenFor("bob", "b", false)}})
	as := func(secret, method, path string, body any) answer {
		t.Helper()
		return en.do(method, path, body, "Authorization", "Bearer "+secret)
	}
	a := as("a", "POST", "/v1/sessions", map[string]any{})
	var sess v1.Session
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &sess) != nil {
		t.Fatalf("alice's session: %d %s", a.status, a.body)
	}
	base := "/v1/sessions/" + sess.ID
	bobEvents := en.sse(t, "b", "session="+sess.ID)
	aliceEvents := en.sse(t, "a", "session="+sess.ID)
	if a = en.do("PUT", base+"/files/secret.txt", "alice's secret", "Authorization", "Bearer a", "Content-Type", "application/octet-stream"); a.status != http.StatusCreated {
		t.Fatalf("alice's file: %d %s", a.status, a.body)
	}
	var cx v1.Context
	if a = as("a", "POST", base+"/contexts", map[string]any{}); a.status != http.StatusCreated || json.Unmarshal(a.body, &cx) != nil {
		t.Fatalf("alice's context: %d %s", a.status, a.body)
	}
	if a = as("a", "POST", base+"/contexts/"+cx.ID+"/run", map[string]any{"code": "k = 42"}); a.status != 200 {
		t.Fatalf("alice's code: %d %s", a.status, a.body)
	}
	var term v1.Terminal
	if a = as("a", "POST", base+"/terminals", map[string]any{"command": []string{"sh"}}); a.status != http.StatusCreated || json.Unmarshal(a.body, &term) != nil {
		t.Fatalf("alice's terminal: %d %s", a.status, a.body)
	}

	upload, uploadType := uploadBody(t)
	walked := 0
	for _, rt := range en.srv.routes {
		if !strings.HasPrefix(rt.path, "/v1/sessions/{id}") {
			continue
		}
		key := rt.method + " " + rt.path
		in := intrusions[key]
		if in.path == "" {
			in.path = "secret.txt"
		}
		if in.body == "" {
			in.body, in.contentType = "{}", ""
			if strings.HasPrefix(rt.path, "/v1/sessions/{id}/upload") {
				in.body, in.contentType = upload, uploadType
			}
		}
		if in.contentType == "" {
			in.contentType = "application/json"
		}
		path := func(id string) string {
			return strings.NewReplacer("{id}", id, "{context_id}", cx.ID, "{terminal_id}", term.ID, "{path...}", in.path).Replace(rt.path)
		}
		walked++
		got := en.probe(t, "b", rt.method, path(sess.ID), in.body, in.contentType)
		if got.status != http.StatusNotFound {
			t.Errorf("%s as another token: %d %.300s, want 404", key, got.status, got.body)
			continue
		}
		p := got.problem(t)
		// A session that never existed: the same answer but its id.
		none := en.probe(t, "b", rt.method, path("s0000000000000000"), in.body, in.contentType).problem(t)
		if p.Code != "session_not_found" || p.Code != none.Code || strings.ReplaceAll(p.Detail, sess.ID, "s0000000000000000") != none.Detail {
			t.Errorf("%s as another token: %s %q; for no session: %s %q", key, p.Code, p.Detail, none.Code, none.Detail)
		}
	}
	if walked < len(intrusions) {
		t.Errorf("walked %d session routes, fewer than the %d this test knows: a route lost its {id}?", walked, len(intrusions))
	}
	var list v1.Sessions
	if a = as("b", "GET", "/v1/sessions", nil); json.Unmarshal(a.body, &list) != nil || len(list.Sessions) != 0 {
		t.Errorf("bob's list: %d %s", a.status, a.body)
	}

	// Alice's session is as she left it.
	if a = as("a", "GET", base, nil); a.status != 200 {
		t.Fatalf("alice's session after bob: %d %s", a.status, a.body)
	}
	if a = as("a", "GET", base+"/files/secret.txt", nil); a.status != 200 || string(a.body) != "alice's secret" {
		t.Errorf("alice's file after bob: %d %q", a.status, a.body)
	}
	var files v1.FileList
	if a = as("a", "GET", base+"/list", nil); json.Unmarshal(a.body, &files) != nil || len(files.Entries) != 1 || files.Entries[0].Path != "secret.txt" {
		t.Errorf("alice's files after bob: %d %s", a.status, a.body)
	}
	var res v1.CodeResult
	if a = as("a", "POST", base+"/contexts/"+cx.ID+"/run", map[string]any{"code": "k"}); json.Unmarshal(a.body, &res) != nil || string(res.Value) != "42" {
		t.Errorf("alice's context after bob: %d %s", a.status, a.body)
	}
	var contexts v1.Contexts
	if a = as("a", "GET", base+"/contexts", nil); json.Unmarshal(a.body, &contexts) != nil || len(contexts.Contexts) != 1 {
		t.Errorf("alice's contexts after bob: %d %s", a.status, a.body)
	}
	var terms v1.Terminals
	if a = as("a", "GET", base+"/terminals", nil); json.Unmarshal(a.body, &terms) != nil || len(terms.Terminals) != 1 || terms.Terminals[0].Exit != nil {
		t.Errorf("alice's terminals after bob: %d %s", a.status, a.body)
	}
	// Her terminal: nobody else typed into it or resized it, and she can
	// still read it (nobody holds its output).
	screen := en.terminalScreen(t, "a", base+"/terminals/"+term.ID, "stty size; echo end-$((3+4))\n", "end-7")
	if strings.Contains(screen, "BOB-4") || !strings.Contains(screen, "24 80") {
		t.Errorf("alice's terminal after bob: %q", screen)
	}

	// Events: alice's stream has her session's; bob's, filtered on it,
	// none of them before a marker published after everything.
	for e := next(t, aliceEvents); e.Kind != event.KindContext; e = next(t, aliceEvents) {
	}
	en.srv.opts.Engine.Events().Publish(event.Event{Type: "test.marker", Owner: "bob", Session: sess.ID})
	if e := next(t, bobEvents); e.Type != "test.marker" {
		t.Errorf("bob's stream filtered on alice's session: %+v", e)
	}
}

// terminalScreen reads terminal tpath's output as secret while it types
// input, until the screen shows until; it answers the screen.
func (en *env) terminalScreen(t *testing.T, secret, tpath, input, until string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", en.http.URL+tpath+"/output", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := en.http.Client().Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("reading %s: %v %v", tpath, resp, err)
	}
	defer resp.Body.Close()
	if a := en.do("POST", tpath+"/input", input, "Authorization", "Bearer "+secret, "Content-Type", "application/octet-stream"); a.status != 204 {
		t.Fatalf("typing into %s: %d %s", tpath, a.status, a.body)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	var screen strings.Builder
	typ := ""
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			typ = e
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && typ == v1.TerminalEventOutput {
			var o v1.TerminalOutput
			json.Unmarshal([]byte(d), &o)
			screen.Write(o.Data)
			if strings.Contains(screen.String(), until) {
				return screen.String()
			}
		}
	}
	t.Fatalf("terminal %s ended or stalled before %q: %q (%v)", tpath, until, screen.String(), sc.Err())
	return ""
}
