package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/sandbox"
)

func tokenFor(name, secret string, admin bool) auth.Token {
	return auth.Token{Name: name, Hash: sha256.Sum256([]byte(secret)), Admin: admin}
}

func sessionEnv(t *testing.T) (*env, map[string]*client.Client) {
	t.Helper()
	en := newEnv(t, setup{tokens: []auth.Token{tokenFor("alice", "a", false), tokenFor("bob", "b", false), tokenFor("root", "r", true)}})
	cs := map[string]*client.Client{}
	for name, secret := range map[string]string{"alice": "a", "bob": "b", "root": "r"} {
		c, err := client.New(en.http.URL, client.WithToken(secret))
		if err != nil {
			t.Fatal(err)
		}
		cs[name] = c
	}
	return en, cs
}

func wantProblem(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	var p *v1.Problem
	if !errors.As(err, &p) || p.Status != status || p.Code != code {
		t.Fatalf("%s: %v, want %d %s", what, err, status, code)
	}
}

// TestSessionInvalidLimits: invalid limits are the engine's to refuse
// (checked there once), answered naming the field.
func TestSessionInvalidLimits(t *testing.T) {
	_, cs := sessionEnv(t)
	_, err := cs["alice"].CreateSession(context.Background(), &v1.SessionRequest{Limits: sandbox.Limits{Memory: -1}})
	wantProblem(t, "a session with a negative memory limit", err, 400, "limit_invalid")
	if p := (*v1.Problem)(nil); !errors.As(err, &p) || p.Field != "limits" || !strings.Contains(p.Detail, "limits.memory") {
		t.Errorf("a session with a negative memory limit: %v, want the field limits", err)
	}
}

// TestSessionOverHTTP: a session's whole life through the Go client:
// state across three execs, a 50 MiB file up and down byte-identical (far
// over the 1 MiB JSON body bound), streamed output, another token's 404,
// the admin's view, an idempotent close and the audit rows.
func TestSessionOverHTTP(t *testing.T) {
	en, cs := sessionEnv(t)
	ctx := context.Background()
	alice := cs["alice"]
	s, err := alice.CreateSession(ctx, &v1.SessionRequest{Labels: map[string]string{"agent": "t"}, Limits: sandbox.Limits{WorkSize: 64 * sandbox.MiB}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Owner != "alice" || s.Labels["agent"] != "t" || s.Backend != "local" || s.Expires.Sub(s.Created) <= 0 {
		t.Fatalf("session %+v", s)
	}
	for i := 1; i <= 3; i++ {
		res, err := alice.Exec(ctx, s.ID, &v1.SessionExec{Command: []string{"sh", "-c", "echo x >> n; wc -l < n"}})
		if err != nil || strings.TrimSpace(res.Stdout) != string(rune('0'+i)) {
			t.Fatalf("exec %d: %+v, %v", i, res, err)
		}
	}
	var out bytes.Buffer
	res, err := alice.ExecStream(ctx, s.ID, &v1.SessionExec{Code: "print(open('n').read().count('x'))"}, &out, io.Discard)
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(out.String()) != "3" {
		t.Fatalf("streamed exec: %q, %+v, %v", out.String(), res, err)
	}

	const size = 50 * sandbox.MiB
	h := sha256.New()
	fi, err := alice.PutFile(ctx, s.ID, "data/big.bin", io.TeeReader(io.LimitReader(pattern{}, size), h))
	if err != nil || fi.Size != size || fi.Type != "file" || fi.Path != "data/big.bin" {
		t.Fatalf("PutFile: %+v, %v", fi, err)
	}
	want := h.Sum(nil)
	h.Reset()
	if n, err := alice.GetFile(ctx, s.ID, "data/big.bin", h); err != nil || n != size || !bytes.Equal(h.Sum(nil), want) {
		t.Fatalf("GetFile: %d, %v, identical %v", n, err, bytes.Equal(h.Sum(nil), want))
	}
	if head, n, err := alice.ReadFile(ctx, s.ID, "data/big.bin", 10); err != nil || n != size || len(head) != 10 {
		t.Fatalf("ReadFile of the first 10 bytes: %d bytes, size %d, %v", len(head), n, err)
	}
	if all, n, err := alice.ReadFile(ctx, s.ID, "n", 100); err != nil || n != 6 || string(all) != "x\nx\nx\n" {
		t.Fatalf("ReadFile of a whole small file: %q, size %d, %v", all, n, err)
	}
	if a := en.do("GET", "/v1/sessions/"+s.ID+"/files/n?max=-1", nil, "Authorization", "Bearer a"); a.status != http.StatusBadRequest {
		t.Fatalf("max=-1: %d %s", a.status, a.body)
	}
	if l, err := alice.List(ctx, s.ID, "data"); err != nil || len(l.Entries) != 1 || l.Entries[0].Size != size {
		t.Fatalf("List: %+v, %v", l, err)
	}
	if err := alice.Remove(ctx, s.ID, "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Mkdir(ctx, s.ID, "a/b"); err != nil {
		t.Fatal(err)
	}
	if st, err := alice.Stat(ctx, s.ID, "a/b"); err != nil || st.Type != "dir" {
		t.Fatalf("Stat: %+v, %v", st, err)
	}

	// Another token: as if the session did not exist.
	bob := cs["bob"]
	_, err = bob.Session(ctx, s.ID)
	wantProblem(t, "bob's GET", err, http.StatusNotFound, "session_not_found")
	_, err = bob.Exec(ctx, s.ID, &v1.SessionExec{Command: []string{"true"}})
	wantProblem(t, "bob's exec", err, http.StatusNotFound, "session_not_found")
	_, err = bob.PutFile(ctx, s.ID, "x", strings.NewReader("x"))
	wantProblem(t, "bob's upload", err, http.StatusNotFound, "session_not_found")
	_, err = bob.GetFile(ctx, s.ID, "n", io.Discard)
	wantProblem(t, "bob's download", err, http.StatusNotFound, "session_not_found")
	wantProblem(t, "bob's close", bob.CloseSession(ctx, s.ID), http.StatusNotFound, "session_not_found")
	if l, err := bob.Sessions(ctx); err != nil || len(l) != 0 {
		t.Fatalf("bob lists %+v, %v", l, err)
	}
	if l, err := cs["root"].Sessions(ctx); err != nil || len(l) != 1 || l[0].Execs != 4 {
		t.Fatalf("the admin lists %+v, %v", l, err)
	}

	for range 2 {
		if err := alice.CloseSession(ctx, s.ID); err != nil {
			t.Fatalf("close: %v", err)
		}
	}
	_, err = alice.Session(ctx, s.ID)
	wantProblem(t, "GET after close", err, http.StatusNotFound, "session_closed")

	// The session's rows, found by its id: created, four execs, the
	// upload, closed.
	if all, err := cs["root"].Audit(ctx, v1.AuditQuery{Session: s.ID}); err != nil || all.Total != 7 {
		t.Fatalf("the session's audit rows: %+v, %v", all, err)
	}
	rows, _, err := en.audit.Query(ctx, audit.Query{Operation: string(v1.OpSession), Limit: 10})
	if err != nil || len(rows) != 2 {
		t.Fatalf("session audit rows %+v, %v", rows, err)
	}
	reasons := rows[0].Reason + "," + rows[1].Reason // newest first
	if reasons != "closed,created" || rows[0].Token != "alice" {
		t.Fatalf("session audit rows: %s (token %s)", reasons, rows[0].Token)
	}
	// Four execs of alice's, and bob's refused one.
	execs, _, err := en.audit.Query(ctx, audit.Query{Operation: string(v1.OpSessionExec), Limit: 10})
	ran := 0
	for _, r := range execs {
		if r.ErrorCode == "" && r.Token == "alice" && r.Reason == "exited" {
			ran++
		} else if r.Token != "bob" || r.ErrorCode != "session_not_found" {
			t.Errorf("session_exec row %+v", r)
		}
	}
	if err != nil || ran != 4 || len(execs) != 5 {
		t.Fatalf("%d session_exec rows, %d of them ran (want 5 and 4), %v", len(execs), ran, err)
	}
}

// TestSessionFileBounds: an upload over the session's work_size is 413
// before or while it is read, leaving nothing; a bad path is 400; a
// directory is not downloaded.
func TestSessionFileBounds(t *testing.T) {
	_, cs := sessionEnv(t)
	ctx := context.Background()
	c := cs["alice"]
	s, err := c.CreateSession(ctx, &v1.SessionRequest{Limits: sandbox.Limits{WorkSize: 4 * sandbox.MiB}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseSession(ctx, s.ID)
	if _, err := c.PutFile(ctx, s.ID, "exact", io.LimitReader(pattern{}, 4*sandbox.MiB-64*sandbox.KiB)); err != nil {
		t.Fatalf("an upload within work_size: %v", err)
	}
	if err := c.Remove(ctx, s.ID, "exact"); err != nil {
		t.Fatal(err)
	}
	// Known length over the bound: refused before the body is read.
	_, err = c.PutFile(ctx, s.ID, "big", bytes.NewReader(make([]byte, 4*sandbox.MiB+1)))
	wantProblem(t, "upload with a length over work_size", err, http.StatusRequestEntityTooLarge, "file_too_large")
	// Unknown length (chunked) over the bound: refused as it is read.
	_, err = c.PutFile(ctx, s.ID, "big", io.LimitReader(pattern{}, 5*sandbox.MiB))
	var p *v1.Problem
	if !errors.As(err, &p) || p.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("streamed upload over work_size: %v, want 413", err)
	}
	if _, err := c.Stat(ctx, s.ID, "big"); !errors.As(err, &p) || p.Status != http.StatusNotFound {
		t.Fatalf("a refused upload left a file: %v", err)
	}
	_, err = c.PutFile(ctx, s.ID, "a/../../x", strings.NewReader("x"))
	if !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("a .. path: %v", err)
	}
	if _, err := c.Mkdir(ctx, s.ID, "d"); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetFile(ctx, s.ID, "d", io.Discard)
	wantProblem(t, "downloading a directory", err, http.StatusBadRequest, "not_a_file")
}

// pattern is an endless reader of bytes that vary.
type pattern struct{}

func (pattern) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i*7 + i>>8)
	}
	return len(p), nil
}

// TestSessionFilesCountAgainstTheToken: file operations take the token's
// rate like executions do: past its burst they are 429 rate_limited.
func TestSessionFilesCountAgainstTheToken(t *testing.T) {
	tok := tokenFor("slow", "s", false)
	tok.Rate, tok.Burst = 0.001, 3
	en := newEnv(t, setup{tokens: []auth.Token{tok}})
	c, err := client.New(en.http.URL, client.WithToken("s"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := c.CreateSession(ctx, &v1.SessionRequest{}) // 1
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseSession(ctx, s.ID)
	if _, err := c.PutFile(ctx, s.ID, "a", strings.NewReader("x")); err != nil { // 2
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, s.ID, "a"); err != nil { // 3
		t.Fatal(err)
	}
	_, err = c.List(ctx, s.ID, "")
	wantProblem(t, "a file operation past the burst", err, http.StatusTooManyRequests, "rate_limited")
}

// TestSessionUpload: one multipart request writes several files, into the
// work dir or a directory, a path with "/" in a filename included, and
// each comes back byte-identical; the bounds hold on both sides: the
// session's work_size over all parts, 1000 files, a filename on every
// part, a checked path, a multipart Content-Type.
func TestSessionUpload(t *testing.T) {
	en, cs := sessionEnv(t)
	ctx := context.Background()
	c := cs["alice"]
	s, err := c.CreateSession(ctx, &v1.SessionRequest{Limits: sandbox.Limits{WorkSize: 4 * sandbox.MiB}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseSession(ctx, s.ID)
	var sent bytes.Buffer
	big := io.TeeReader(io.LimitReader(pattern{}, 3*sandbox.MiB), &sent)
	got, err := c.Upload(ctx, s.ID, "in",
		client.UploadFile{Path: "a.txt", Content: strings.NewReader("alpha")},
		client.UploadFile{Path: "sub/b.txt", Content: strings.NewReader("")},
		client.UploadFile{Path: "big", Content: big})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		path string
		size int64
	}{{"in/a.txt", 5}, {"in/sub/b.txt", 0}, {"in/big", 3 * sandbox.MiB}}
	if len(got) != len(want) {
		t.Fatalf("upload answered %+v", got)
	}
	for i, w := range want {
		if got[i].Path != w.path || got[i].Size != w.size || got[i].Type != "file" {
			t.Errorf("file %d: %+v, want %s of %d bytes", i, got[i], w.path, w.size)
		}
	}
	var back bytes.Buffer
	if _, err := c.GetFile(ctx, s.ID, "in/big", &back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Bytes(), sent.Bytes()) {
		t.Fatal("in/big came back different")
	}
	if _, err := c.Upload(ctx, s.ID, "", client.UploadFile{Path: "top.txt", Content: strings.NewReader("top")}); err != nil {
		t.Fatalf("an upload into the work dir: %v", err)
	}
	if err := c.Remove(ctx, s.ID, "in"); err != nil {
		t.Fatal(err)
	}

	// work_size over all parts: the part that passes it is refused and
	// leaves nothing; the one before it stays.
	_, err = c.Upload(ctx, s.ID, "w",
		client.UploadFile{Path: "one", Content: io.LimitReader(pattern{}, 3*sandbox.MiB)},
		client.UploadFile{Path: "two", Content: io.LimitReader(pattern{}, sandbox.MiB+1)})
	wantProblem(t, "parts over work_size", err, http.StatusRequestEntityTooLarge, "file_too_large")
	if p := (*v1.Problem)(nil); errors.As(err, &p) && !strings.Contains(p.Detail, `part 2 ("two")`) {
		t.Errorf("the problem does not name the part: %q", p.Detail)
	}
	if _, err := c.Stat(ctx, s.ID, "w/one"); err != nil {
		t.Errorf("the part before the failing one: %v", err)
	}
	var p *v1.Problem
	if _, err := c.Stat(ctx, s.ID, "w/two"); !errors.As(err, &p) || p.Status != http.StatusNotFound {
		t.Errorf("the refused part left a file: %v", err)
	}
	if err := c.Remove(ctx, s.ID, "w"); err != nil {
		t.Fatal(err)
	}
	// Exactly work_size in two parts fits.
	if _, err := c.Upload(ctx, s.ID, "w",
		client.UploadFile{Path: "one", Content: io.LimitReader(pattern{}, 3*sandbox.MiB)},
		client.UploadFile{Path: "two", Content: io.LimitReader(pattern{}, sandbox.MiB-3)}); err != nil {
		t.Fatalf("parts of work_size in all: %v", err)
	}
	if err := c.Remove(ctx, s.ID, "w"); err != nil {
		t.Fatal(err)
	}

	// 1000 files fit in one upload, 1001 do not.
	files := func(n int) []client.UploadFile {
		var fs []client.UploadFile
		for i := range n {
			fs = append(fs, client.UploadFile{Path: strconv.Itoa(i), Content: strings.NewReader("x")})
		}
		return fs
	}
	if got, err := c.Upload(ctx, s.ID, "many", files(maxUploadParts)...); err != nil || len(got) != maxUploadParts {
		t.Fatalf("%d files: %d written, %v", maxUploadParts, len(got), err)
	}
	_, err = c.Upload(ctx, s.ID, "more", files(maxUploadParts+1)...)
	wantProblem(t, "one file too many", err, http.StatusRequestEntityTooLarge, "too_many_files")

	// A content reader that fails is the caller's error, not the server's.
	_, err = c.Upload(ctx, s.ID, "", client.UploadFile{Path: "bad", Content: io.MultiReader(strings.NewReader("x"), iotestErrReader{})})
	if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "reading bad") {
		t.Errorf("a failing content reader: %v", err)
	}
	if _, err := c.Upload(ctx, s.ID, "", client.UploadFile{Path: "../x", Content: strings.NewReader("x")}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("a .. path in the client: %v", err)
	}

	// What only a hand-made request can send.
	raw := func(ct, body string) answer {
		return en.do("POST", "/v1/sessions/"+s.ID+"/upload", []byte(body), "Authorization", "Bearer a", "Content-Type", ct)
	}
	const mp = "multipart/form-data; boundary=B"
	part := func(disposition, content string) string {
		return "--B\r\nContent-Disposition: " + disposition + "\r\n\r\n" + content + "\r\n"
	}
	for _, tc := range []struct {
		name, ct, body string
		status         int
		code           string
	}{
		{"a raw body", "application/octet-stream", "x", http.StatusUnsupportedMediaType, v1.CodeUnsupportedMedia},
		{"no boundary", "multipart/form-data", "x", http.StatusUnsupportedMediaType, v1.CodeUnsupportedMedia},
		{"no part", mp, "--B--\r\n", http.StatusBadRequest, "upload_invalid"},
		{"a form field", mp, part(`form-data; name="note"`, "hi") + "--B--\r\n", http.StatusBadRequest, "upload_invalid"},
		{"a .. filename", mp, part(`form-data; name="f"; filename="../x"`, "x") + "--B--\r\n", http.StatusBadRequest, "path_invalid"},
		{"an absolute filename", mp, part(`form-data; name="f"; filename="/etc/x"`, "x") + "--B--\r\n", http.StatusBadRequest, "path_invalid"},
		{"a cut body", mp, part(`form-data; name="f"; filename="cut"`, "x"), http.StatusBadRequest, "upload_invalid"},
	} {
		a := raw(tc.ct, tc.body)
		var p v1.Problem
		json.Unmarshal(a.body, &p)
		if a.status != tc.status || p.Code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, a.status, a.body, tc.status, tc.code)
		}
	}
	if a := raw(mp, part(`form-data; name="f"; filename="d/raw.txt"`, "raw")+"--B--\r\n"); a.status != http.StatusCreated {
		t.Errorf("a hand-made upload: %d %s", a.status, a.body)
	}
	var back2 bytes.Buffer
	if _, err := c.GetFile(ctx, s.ID, "d/raw.txt", &back2); err != nil || back2.String() != "raw" {
		t.Errorf("d/raw.txt: %q %v", back2.String(), err)
	}
	if _, err := c.Stat(ctx, s.ID, "cut"); !errors.As(err, &p) || p.Status != http.StatusNotFound {
		t.Errorf("a cut part left a file: %v", err)
	}
	// A declared length over work_size plus the parts' overhead is refused
	// before a byte is read.
	host := strings.TrimPrefix(en.http.URL, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/sessions/%s/upload HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer a\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		s.ID, host, mp, 4*sandbox.MiB+uploadOverhead+1)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a declared length over the bound: %d", resp.StatusCode)
	}
}

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }
