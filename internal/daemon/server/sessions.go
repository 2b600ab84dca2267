package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"path"
	"slices"
	"strconv"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/internal/daemon/wire"
	"github.com/execbox/execbox/sandbox"
)

// maxListed bounds the entries one listing of a session directory
// answers with.
const maxListed = 10_000

// maxUploadParts bounds the files one multipart upload may carry, and
// uploadOverhead the bytes of its part headers and boundaries: the body is
// at most the session's work_size plus that. maxPartHeader bounds one
// part's headers (as parsed: each field's name, ": ", value and CRLF): a
// filename of the longest path, 4096 bytes, fits even percent-encoded.
const (
	maxUploadParts = 1000
	uploadOverhead = sandbox.MiB
	maxPartHeader  = 16 * sandbox.KiB
)

// Codes of uploads.
const (
	CodeTooManyUploads     = "too_many_uploads"      // ErrBusy (429): server.max_uploads, a token's share or the admin reserve
	CodePartHeaderTooLarge = "part_header_too_large" // ErrLimit (413): a part's headers over maxPartHeader
)

// sessionRoutes are the session API's routes.
func (s *Server) sessionRoutes() []route {
	return []route{
		{"POST", "/v1/sessions", token, s.handleSessionCreate},
		{"GET", "/v1/sessions", token, s.handleSessionList},
		{"GET", "/v1/sessions/{id}", token, s.handleSessionGet},
		{"DELETE", "/v1/sessions/{id}", token, s.handleSessionClose},
		{"POST", "/v1/sessions/{id}/exec", token, s.handleSessionExec},
		{"PUT", "/v1/sessions/{id}/files/{path...}", token, s.handleFilePut},
		{"GET", "/v1/sessions/{id}/files/{path...}", token, s.handleFileGet},
		{"DELETE", "/v1/sessions/{id}/files/{path...}", token, s.handleFileDelete},
		{"GET", "/v1/sessions/{id}/stat/{path...}", token, s.handleFileStat},
		{"GET", "/v1/sessions/{id}/list", token, s.handleFileList},
		{"GET", "/v1/sessions/{id}/list/{path...}", token, s.handleFileList},
		{"POST", "/v1/sessions/{id}/mkdir/{path...}", token, s.handleMkdir},
		{"POST", "/v1/sessions/{id}/upload", token, s.handleUpload},
		{"POST", "/v1/sessions/{id}/upload/{path...}", token, s.handleUpload},
	}
}

// handleSessionCreate is POST /v1/sessions.
func (s *Server) handleSessionCreate(w http.ResponseWriter, r *http.Request) {
	x := s.begin(r, v1.OpSession)
	defer x.end()
	if !x.admit(w) {
		return
	}
	var req v1.SessionRequest
	if err := s.decodeJSON(w, r, &req, s.opts.MaxBody); err != nil {
		x.fail(w, err)
		return
	}
	spec, err := req.Build(sandbox.Policy{})
	if err != nil {
		x.fail(w, err)
		return
	}
	sel := sandbox.Selection{Backend: req.Backend, Tier: req.Tier, MinIsolation: req.MinIsolation}
	if !x.check(w, guard.Call{}, &sel) {
		return
	}
	sess, err := s.opts.Engine.OpenSession(r.Context(), s.owner(x.info.identity), engine.SessionRequest{
		Selection: sel,
		Spec:      spec, TTL: time.Duration(req.TTL), Idle: time.Duration(req.IdleTimeout), Labels: req.Labels,
	})
	if err != nil {
		if c := sandbox.CodeOf(err); c == "limit_too_high" || c == "limit_invalid" {
			err = &v1.FieldError{Field: "limits", Err: err}
		}
		x.fail(w, err)
		return
	}
	info := sess.Info()
	x.entry.Backend, x.entry.Isolation, x.entry.Reason = info.Backend, info.Isolation.String(), engine.SessionCreated
	x.entry.Session = info.ID
	x.entry.Limits = &info.Limits
	x.info.attrs = append(x.info.attrs, sessionAttr(info.ID))
	x.end()
	w.Header().Set("Location", "/v1/sessions/"+info.ID)
	writeJSON(w, http.StatusCreated, wire.Session(info))
}

// session finds the caller's session {id}: another token's is 404.
func (s *Server) session(r *http.Request) (*engine.Session, error) {
	info := infoOf(r.Context())
	info.attrs = append(info.attrs, sessionAttr(r.PathValue("id")))
	return s.opts.Engine.Session(s.owner(info.identity), r.PathValue("id"))
}

// handleSessionList is GET /v1/sessions.
func (s *Server) handleSessionList(w http.ResponseWriter, r *http.Request) {
	list := s.opts.Engine.Sessions(s.owner(infoOf(r.Context()).identity))
	out := v1.Sessions{Sessions: make([]v1.Session, 0, len(list))}
	for _, i := range list {
		out.Sessions = append(out.Sessions, wire.Session(i))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleSessionGet is GET /v1/sessions/{id}.
func (s *Server) handleSessionGet(w http.ResponseWriter, r *http.Request) {
	sess, err := s.session(r)
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	writeJSON(w, http.StatusOK, wire.Session(sess.Info()))
}

// handleSessionClose is DELETE /v1/sessions/{id}: 204, also for a session
// already closed.
func (s *Server) handleSessionClose(w http.ResponseWriter, r *http.Request) {
	info := infoOf(r.Context())
	info.attrs = append(info.attrs, sessionAttr(r.PathValue("id")))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Minute)
	defer cancel()
	if err := s.opts.Engine.CloseSession(ctx, s.owner(info.identity), r.PathValue("id")); err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleSessionExec is POST /v1/sessions/{id}/exec: as a run, in the
// session's sandbox.
func (s *Server) handleSessionExec(w http.ResponseWriter, r *http.Request) {
	x := s.begin(r, v1.OpSessionExec)
	defer x.end()
	var req v1.SessionExec
	sess, ok := s.sessionCall(w, r, x, &req)
	if !ok {
		return
	}
	x.inFlight()
	x.entry.CodeSHA256 = sessionExecHash(sess.ID(), &req)
	p, err := req.Build()
	if err != nil {
		x.fail(w, err)
		return
	}
	info := sess.Info()
	if !x.check(w, guard.Call{Language: runLanguage(req.Code, req.Language), Backend: info.Backend}, nil) {
		return
	}
	x.entry.Limits = &info.Limits
	code := runCode(req.Code, req.Command)
	if q := r.URL.Query().Get("stream"); q == "1" || q == "true" {
		s.streamRun(w, r, x, info.Limits.Output, func(ctx context.Context) (*sandbox.Result, error) { return sess.Exec(ctx, p) }, p, code)
		return
	}
	res, err := sess.Exec(r.Context(), p)
	if err != nil {
		x.fail(w, err)
		return
	}
	s.answerResult(w, r, x, res, code)
}

// sessionExecHash is an exec's audit hash: the session and everything
// that decides what runs.
func sessionExecHash(id string, req *v1.SessionExec) string {
	h := audit.NewRequestHash("session_exec")
	h.Field("session", []byte(id))
	cmd, _ := json.Marshal(req.Command)
	h.Field("command", cmd)
	h.Field("code", []byte(req.Code))
	h.Field("language", []byte(req.Language))
	h.Field("dir", []byte(req.Dir))
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		h.Field("env:"+k, []byte(req.Env[k]))
	}
	h.Field("stdin", []byte(req.Stdin))
	h.Field("stdin_base64", req.StdinBase64)
	return h.Sum()
}

// files finds the caller's session {id} and its file operations, and
// checks {path}: "" is the work dir, allowed only where emptyOK. The
// operation counts against the token's rate and in-flight limits, as an
// execution does, until the caller calls release (always, even on an
// error).
func (s *Server) files(r *http.Request, emptyOK bool) (_ *engine.Session, _ sandbox.Files, _ string, release func(), _ error) {
	release = func() {}
	if id := infoOf(r.Context()).identity; id != nil {
		rel, err := id.Admit()
		if err != nil {
			return nil, nil, "", release, err
		}
		release = rel
	}
	sess, err := s.session(r)
	if err != nil {
		return nil, nil, "", release, err
	}
	f, err := sess.Files()
	if err != nil {
		return nil, nil, "", release, err
	}
	p := r.PathValue("path")
	if p != "" || !emptyOK {
		if err := sandbox.CheckPath(p); err != nil {
			return nil, nil, "", release, err
		}
	}
	return sess, f, p, release, nil
}

// handleFilePut is PUT /v1/sessions/{id}/files/{path}: the raw body
// becomes the file, streamed (never held whole), at most the session's
// work_size, at least at the minimum body rate; 201 with the file's
// description. It is an upload: it takes an upload slot, and its audit row
// names the file's path, size and SHA-256.
func (s *Server) handleFilePut(w http.ResponseWriter, r *http.Request) {
	x := s.begin(r, v1.OpSessionUpload)
	defer x.end()
	sess, f, p, release, err := s.files(r, false)
	defer release()
	if err != nil {
		x.fail(w, err)
		return
	}
	x.uploadTo(sess)
	max := sess.Info().Limits.WorkSize
	if r.ContentLength > max {
		x.fail(w, sandbox.Errorf(sandbox.ErrLimit, "file_too_large",
			"the body is %d bytes, over the session's work_size %s", r.ContentLength, sandbox.HumanSize(max)))
		return
	}
	done, err := s.uploads.take(s.owner(x.info.identity))
	if err != nil {
		x.fail(w, err)
		return
	}
	defer done()
	body := paced(w, r)
	h := sha256.New()
	rd := &readRecorder{r: io.TeeReader(body, h)}
	n, err := f.PutFile(r.Context(), p, rd, max)
	if err != nil {
		if rd.err != nil {
			err = s.bodyError(w, rd.err)
		}
		x.fail(w, err)
		return
	}
	body.done()
	x.entry.Inputs = []audit.Input{{Path: p, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}}
	st, err := f.Stat(r.Context(), p)
	if err != nil {
		x.fail(w, err)
		return
	}
	x.entry.Reason = "uploaded"
	x.end()
	writeJSON(w, http.StatusCreated, st)
}

// uploadTo notes in an upload's audit row the session it writes into.
func (x *execution) uploadTo(sess *engine.Session) {
	info := sess.Info()
	x.entry.Session = info.ID
	x.entry.Backend, x.entry.Isolation = info.Backend, info.Isolation.String()
}

// handleUpload is POST /v1/sessions/{id}/upload[/{dir}]: a
// multipart/form-data body (an HTML form's, curl -F's) whose every part is
// a file, written to {dir}/{its filename} — a relative path, checked like
// any other — part by part, streamed, never held whole; in all at most the
// session's work_size and maxUploadParts files, each part's headers at
// most maxPartHeader, at least at the minimum body rate. 201 with the
// files. A failing part is answered with its problem, naming the part; the
// parts before it stay written, the failing one leaves no file. It takes
// an upload slot; its audit row names each file written: path, size and
// SHA-256.
func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {
	x := s.begin(r, v1.OpSessionUpload)
	defer x.end()
	sess, f, dir, release, err := s.files(r, true)
	defer release()
	if err != nil {
		x.fail(w, err)
		return
	}
	x.uploadTo(sess)
	files, ok := s.receive(w, r, x, sess, f, func(name string) (string, error) {
		if err := sandbox.CheckPath(name); err != nil {
			return "", err
		}
		return path.Join(dir, name), nil
	})
	if !ok {
		return
	}
	writeJSON(w, http.StatusCreated, v1.Uploaded{Files: files})
}

// receive writes the files of r's multipart/form-data body into sess,
// part by part, streamed: where names the path of each part's file from
// its filename as sent. It takes an upload slot, records each file in
// x's audit row and ends x; a failure is answered here (false).
func (s *Server) receive(w http.ResponseWriter, r *http.Request, x *execution, sess *engine.Session, f sandbox.Files, where func(name string) (string, error)) ([]sandbox.FileInfo, bool) {
	ct := r.Header.Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		x.fail(w, v1.ProblemFor(http.StatusUnsupportedMediaType, v1.CodeUnsupportedMedia,
			"Content-Type %q is not multipart/form-data with a boundary (PUT …/files/{path} takes a raw body)", ct))
		return nil, false
	}
	left := sess.Info().Limits.WorkSize
	if r.ContentLength > left+uploadOverhead {
		x.fail(w, sandbox.Errorf(sandbox.ErrLimit, "file_too_large",
			"the body is %d bytes, over the session's work_size %s", r.ContentLength, sandbox.HumanSize(left)))
		return nil, false
	}
	done, err := s.uploads.take(s.owner(x.info.identity))
	if err != nil {
		x.fail(w, err)
		return nil, false
	}
	defer done()
	body := paced(w, r)
	hb := &partHeaders{r: http.MaxBytesReader(w, body, left+uploadOverhead), left: -1}
	mr := multipart.NewReader(hb, params["boundary"])
	var out v1.Uploaded
	fail := func(part int, name string, err error) {
		var mbe *http.MaxBytesError
		switch {
		case hb.over:
			err = partHeaderTooLarge()
		case errors.As(hb.err, &mbe):
			err = sandbox.Errorf(sandbox.ErrLimit, "file_too_large", "the body is over the session's work_size %s plus %s for the parts' headers",
				sandbox.HumanSize(sess.Info().Limits.WorkSize), sandbox.HumanSize(uploadOverhead))
		case hb.err != nil:
			err = s.bodyError(w, hb.err)
		}
		p := problemOf(r, err)
		what := fmt.Sprintf("part %d", part)
		if name != "" {
			what += fmt.Sprintf(" (%q)", name)
		}
		p.Detail = fmt.Sprintf("%s: %s; the %d file(s) before it were written", what, p.Detail, len(out.Files))
		x.fail(w, p)
	}
	for i := 1; ; i++ {
		hb.arm()
		part, err := mr.NextPart()
		hb.disarm()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if hb.err == nil && !hb.over {
				err = sandbox.Errorf(sandbox.ErrInvalid, "upload_invalid", "reading the multipart body: %v", err)
			}
			fail(i, "", err)
			return nil, false
		}
		// The filename as sent: Part.FileName keeps only its last element.
		_, cd, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		name := cd["filename"]
		switch {
		case headerSize(part.Header) > maxPartHeader:
			fail(i, "", partHeaderTooLarge())
			return nil, false
		case name == "":
			fail(i, part.FormName(), sandbox.Errorf(sandbox.ErrInvalid, "upload_invalid", "the part has no filename: every part of an upload is a file"))
			return nil, false
		case i > maxUploadParts:
			fail(i, name, sandbox.Errorf(sandbox.ErrLimit, "too_many_files", "an upload carries at most %d files", maxUploadParts))
			return nil, false
		}
		p, err := where(name)
		if err != nil {
			fail(i, name, err)
			return nil, false
		}
		h := sha256.New()
		rd := &readRecorder{r: io.TeeReader(part, h)}
		n, err := f.PutFile(r.Context(), p, rd, left)
		if err != nil {
			if rd.err != nil && hb.err == nil {
				// The part itself is broken (cut short, a bad boundary).
				err = sandbox.Errorf(sandbox.ErrInvalid, "upload_invalid", "reading the part: %v", rd.err)
			}
			fail(i, name, err)
			return nil, false
		}
		left -= n
		x.entry.Inputs = append(x.entry.Inputs, audit.Input{Path: p, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))})
		st, err := f.Stat(r.Context(), p)
		if err != nil {
			fail(i, name, err)
			return nil, false
		}
		out.Files = append(out.Files, st)
	}
	if len(out.Files) == 0 {
		x.fail(w, sandbox.Errorf(sandbox.ErrInvalid, "upload_invalid", "the upload has no part"))
		return nil, false
	}
	body.done()
	x.entry.Reason = "uploaded"
	x.end()
	return out.Files, true
}

func partHeaderTooLarge() error {
	return sandbox.Errorf(sandbox.ErrLimit, CodePartHeaderTooLarge, "a part's headers are over %s", sandbox.HumanSize(maxPartHeader))
}

// headerSize is the size of a part's headers as parsed: each field's
// name, ": ", value and CRLF.
func headerSize(h textproto.MIMEHeader) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// partSlack is what multipart's reader may read beyond a part's headers
// while it finds the part and reads them: the boundary line before them
// and the blank line after (a line must fit its 4 KiB buffer), and one
// buffer's read-ahead. The preamble before the first part counts too.
const partSlack = 2*4*sandbox.KiB + 16

// partHeaders is an upload's body as multipart's reader reads it. While
// the reader finds the next part and reads its headers (between arm and
// disarm) it may read maxPartHeader + partSlack, then reads fail: Go's
// reader would buffer up to 10 MiB of a part's headers and has no option
// to lower that (issue 33: 64 uploads with 9 MiB of headers each took the
// server from 0.32 to 1.58 GB).
type partHeaders struct {
	r    io.Reader
	left int64 // what may still be read while armed; -1: not armed
	over bool  // a part's headers were cut
	err  error // the body's own read error, not the sandbox's
}

var errPartHeaders = errors.New("a part's headers are too large")

func (p *partHeaders) arm()    { p.left = maxPartHeader + partSlack }
func (p *partHeaders) disarm() { p.left = -1 }

func (p *partHeaders) Read(b []byte) (int, error) {
	if p.left == 0 {
		p.over = true
		return 0, errPartHeaders
	}
	if p.left > 0 && int64(len(b)) > p.left {
		b = b[:p.left]
	}
	n, err := p.r.Read(b)
	if p.left > 0 {
		p.left -= int64(n)
	}
	if err != nil && err != io.EOF && p.err == nil {
		p.err = err
	}
	return n, err
}

// readRecorder keeps the first error other than io.EOF its reader gave.
type readRecorder struct {
	r   io.Reader
	err error
}

func (rr *readRecorder) Read(b []byte) (int, error) {
	n, err := rr.r.Read(b)
	if err != nil && err != io.EOF && rr.err == nil {
		rr.err = err
	}
	return n, err
}

// handleFileGet is GET /v1/sessions/{id}/files/{path}: the file's bytes,
// streamed; with ?max=N only its first N bytes (X-Execbox-File-Size says
// how many it has).
func (s *Server) handleFileGet(w http.ResponseWriter, r *http.Request) {
	sess, f, p, release, err := s.files(r, false)
	defer release()
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	limit := sess.Info().Limits.WorkSize
	head := false
	if q := r.URL.Query().Get("max"); q != "" {
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil || n < 0 {
			writeProblem(w, r, problemOf(r, invalidField("max", "%q is not a number of bytes", q)))
			return
		}
		limit, head = min(n, limit), true
	}
	st, err := f.Stat(r.Context(), p)
	if err == nil && st.Type != sandbox.FileRegular {
		err = sandbox.Errorf(sandbox.ErrInvalid, "not_a_file", "%q is a %s, not a regular file", p, st.Type)
	}
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	// The length may change while the program runs: it is not promised.
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Execbox-File-Size", strconv.FormatInt(st.Size, 10))
	if r.Method == http.MethodHead {
		return
	}
	out := &lazyWriter{w: w}
	if _, err := f.GetFile(r.Context(), p, out, limit); err != nil {
		if head && sandbox.CodeOf(err) == "file_too_large" {
			return // the first max bytes were asked for, and sent
		}
		if !out.started {
			writeProblem(w, r, problemOf(r, err))
			return
		}
		// Too late for a status: cut the answer short so the client sees
		// a broken transfer, not a short file.
		s.log.Warn("downloading a session file", "request_id", infoOf(r.Context()).id, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// lazyWriter writes the status line with the first byte, so that a
// failure before any is still answered with a problem.
type lazyWriter struct {
	w       http.ResponseWriter
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.w.WriteHeader(http.StatusOK)
	}
	return l.w.Write(p)
}

// handleFileDelete is DELETE /v1/sessions/{id}/files/{path}: 204.
func (s *Server) handleFileDelete(w http.ResponseWriter, r *http.Request) {
	_, f, p, release, err := s.files(r, false)
	defer release()
	if err == nil {
		err = f.Remove(r.Context(), p)
	}
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleFileStat is GET /v1/sessions/{id}/stat/{path}.
func (s *Server) handleFileStat(w http.ResponseWriter, r *http.Request) {
	_, f, p, release, err := s.files(r, true)
	defer release()
	var st sandbox.FileInfo
	if err == nil {
		st, err = f.Stat(r.Context(), p)
	}
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// handleFileList is GET /v1/sessions/{id}/list[/{path}].
func (s *Server) handleFileList(w http.ResponseWriter, r *http.Request) {
	_, f, p, release, err := s.files(r, true)
	defer release()
	var out v1.FileList
	if err == nil {
		out.Entries, out.Truncated, err = f.List(r.Context(), p, maxListed)
	}
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	if out.Entries == nil {
		out.Entries = []v1.FileInfo{}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleMkdir is POST /v1/sessions/{id}/mkdir/{path}: 201 with the
// directory's description.
func (s *Server) handleMkdir(w http.ResponseWriter, r *http.Request) {
	_, f, p, release, err := s.files(r, false)
	defer release()
	var st sandbox.FileInfo
	if err == nil {
		if err = f.Mkdir(r.Context(), p); err == nil {
			st, err = f.Stat(r.Context(), p)
		}
	}
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	writeJSON(w, http.StatusCreated, st)
}

func sessionAttr(id string) slog.Attr { return slog.String("session", id) }

// sessionEvent records a session event in the metrics and, for its end
// (closed, expired, idle, shutdown), in the audit log; its creation is
// recorded by the request that made it.
func (s *Server) sessionEvent(event string, i engine.SessionInfo) {
	s.metrics.SessionEvent(event)
	if event != engine.SessionCreated {
		s.e2b.forget(i.ID)
	}
	if event == engine.SessionCreated || s.opts.Audit == nil {
		return
	}
	e := audit.Entry{Record: audit.Record{Token: i.Owner, Session: i.ID, Operation: string(v1.OpSession),
		Backend: i.Backend, Isolation: i.Isolation.String(), Reason: i.Closed, Duration: time.Since(i.Created)}}
	if _, err := s.opts.Audit.Record(context.Background(), e); err != nil {
		s.metrics.AuditError()
		s.log.Error("writing the audit log", "session", i.ID, "err", err)
	}
}
