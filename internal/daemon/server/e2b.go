package server

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/daemon/e2b"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/sandbox"
)

// The E2B-compatible API (package e2b holds its wire): under /e2b, the
// control API (sandboxes: X-API-Key is the execbox token) and, for requests
// that carry E2b-Sandbox-Id, what the SDKs send into a sandbox (its access
// token authenticates them). An E2B sandbox is an execbox session whose
// agent runs from the start, so that its processes run side by side; each
// call passes the same token limits, guard, budgets and audit as its REST
// twin.

// e2bPrefix is where the surface is served: both E2B_API_URL and
// E2B_SANDBOX_URL point there.
const e2bPrefix = "/e2b"

// Bounds of the surface.
const (
	// e2bMaxBody bounds a control request's body and a Connect message.
	e2bMaxBody = 256 * sandbox.KiB
	// e2bDefaultTimeout is a sandbox's life when its request names none
	// (the SDKs send one).
	e2bDefaultTimeout = 5 * time.Minute
	// e2bMaxList is the most sandboxes one list page holds.
	e2bMaxList = 100
)

// e2bSandbox is one session seen through the E2B API.
type e2bSandbox struct {
	id       string
	identity *auth.Identity // the token that made it: in-sandbox calls act as it
	owner    engine.Owner
	token    string // the access token the SDKs send in-sandbox
	template string
	started  time.Time

	mu      sync.Mutex
	end     time.Time   // when the sandbox's timeout kills it
	timer   *time.Timer // at end
	procs   map[uint32]*e2bProc
	nextPID uint32
	// contexts are the code interpreter's default contexts, per language.
	contexts map[string]string
	watches  int // WatchDir streams open
}

// e2bSandboxes are the open E2B sandboxes, by id.
type e2bSandboxes struct {
	mu      sync.Mutex
	m       map[string]*e2bSandbox
	watches atomic.Int64 // WatchDir streams open, every sandbox's
}

func newE2BSandboxes() *e2bSandboxes { return &e2bSandboxes{m: map[string]*e2bSandbox{}} }

func (ss *e2bSandboxes) get(id string) (*e2bSandbox, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	sb, ok := ss.m[id]
	return sb, ok
}

// forget drops a closed session's sandbox and stops its timer; its
// processes ended with the session.
func (ss *e2bSandboxes) forget(id string) {
	ss.mu.Lock()
	sb, ok := ss.m[id]
	delete(ss.m, id)
	ss.mu.Unlock()
	if ok {
		sb.mu.Lock()
		sb.timer.Stop()
		sb.mu.Unlock()
	}
}

// list is every sandbox, oldest first.
func (ss *e2bSandboxes) list() []*e2bSandbox {
	ss.mu.Lock()
	out := make([]*e2bSandbox, 0, len(ss.m))
	for _, sb := range ss.m {
		out = append(out, sb)
	}
	ss.mu.Unlock()
	slices.SortFunc(out, func(a, b *e2bSandbox) int { return a.started.Compare(b.started) })
	return out
}

// tokenIs says whether t is the sandbox's access token.
func (sb *e2bSandbox) tokenIs(t string) bool {
	return t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(sb.token)) == 1
}

// setEnd moves the sandbox's end to at, within its session's life.
// setEnd moves the sandbox's end to d from now (only later, when
// later); past its session's life is refused, not cut short.
func (sb *e2bSandbox) setEnd(d time.Duration, info engine.SessionInfo, later bool) error {
	at := time.Now().Add(d)
	if at.After(info.Expires) {
		return invalidField("timeout", "%s from now is past the sandbox's longest life (sessions.max_ttl from its start): at most %s",
			d, time.Until(info.Expires).Truncate(time.Second))
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if later && !at.After(sb.end) {
		return nil
	}
	sb.end = at
	sb.timer.Reset(d)
	return nil
}

func (s *Server) e2bHandler() http.Handler {
	control := http.NewServeMux()
	for _, rt := range []route{
		{"POST", "/sandboxes", token, s.e2bCreate},
		{"POST", "/v2/sandboxes", token, s.e2bCreate},
		{"GET", "/sandboxes", token, s.e2bList},
		{"GET", "/v2/sandboxes", token, s.e2bList},
		{"GET", "/sandboxes/{sandboxID}", token, s.e2bGet},
		{"DELETE", "/sandboxes/{sandboxID}", token, s.e2bKill},
		{"POST", "/sandboxes/{sandboxID}/timeout", token, s.e2bSetTimeout},
		{"POST", "/sandboxes/{sandboxID}/connect", token, s.e2bConnect},
		{"POST", "/v2/sandboxes/{sandboxID}/connect", token, s.e2bConnect},
	} {
		control.Handle(rt.method+" "+e2bPrefix+rt.path, s.authenticated(rt))
	}
	control.HandleFunc(e2bPrefix+"/", s.e2bUnserved)
	inside := s.e2bInside()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(e2b.HeaderSandboxID) != "" {
			s.e2bSandboxCall(w, r, inside)
			return
		}
		// The SDKs send the key as X-API-Key; execbox's tokens are
		// bearer tokens.
		if k := r.Header.Get(e2b.HeaderAPIKey); k != "" && r.Header.Get("Authorization") == "" {
			r.Header.Set("Authorization", "Bearer "+k)
		}
		ew := &e2bErrors{ResponseWriter: w}
		control.ServeHTTP(ew, r)
		ew.finish()
	})
}

// e2bUnserved answers what the surface does not serve: what execbox
// cannot do yet says so and names why, in the SDKs' error shape.
func (s *Server) e2bUnserved(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimPrefix(r.URL.Path, e2bPrefix)
	for _, u := range e2bUnservedPaths {
		if u.re.MatchString(p) {
			writeE2BError(w, http.StatusNotImplemented, "execbox's E2B API does not serve %s %s: %s", r.Method, p, u.why)
			return
		}
	}
	writeE2BError(w, http.StatusNotFound, "execbox's E2B API has no %s %s", r.Method, p)
}

var e2bUnservedPaths = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`^(/v2)?/sandboxes/[^/]+/(pause|resume|snapshots|fork)$`), "pause, resume, snapshots and fork are not in execbox yet"},
	{regexp.MustCompile(`^/snapshots`), "snapshots are not in execbox yet"},
	{regexp.MustCompile(`^/sandboxes/[^/]+/network$`), "egress policies are not in execbox yet: a sandbox has no network"},
	{regexp.MustCompile(`^(/v2)?/sandboxes/[^/]+/(metrics|logs)$`), "per-sandbox metrics and logs are execbox's /metrics and /v1/events"},
	{regexp.MustCompile(`^/sandboxes/metrics$`), "per-sandbox metrics are execbox's /metrics"},
	{regexp.MustCompile(`^(/v2|/v3)?/templates`), "templates are the templates " + e2b.DefaultTemplate + " and " + e2b.CodeInterpreterTemplate + " until images are in execbox"},
	{regexp.MustCompile(`^/volumes`), "volumes are not in execbox yet"},
}

func writeE2BError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, e2b.Error{Code: status, Message: e2bMessage(fmt.Sprintf(format, args...))})
}

// e2bMessage bounds an error's message: one that quotes what the caller
// sent does not send it all back.
func e2bMessage(m string) string {
	const max = 1024
	if len(m) <= max {
		return m
	}
	return strings.ToValidUTF8(m[:max-len("…")], "") + "…"
}

// e2bErrors turns the problems execbox's shared pipeline answers
// (authentication, limits, the guard) into the control API's error
// shape, which the SDKs read.
type e2bErrors struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *e2bErrors) WriteHeader(code int) {
	if w.status == 0 && w.Header().Get("Content-Type") == v1.ContentTypeProblem {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *e2bErrors) Write(p []byte) (int, error) {
	if w.status != 0 {
		if w.body.Len() < 64*sandbox.KiB {
			w.body.Write(p)
		}
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

func (w *e2bErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes on: Connect's streams flush each message.
func (w *e2bErrors) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (w *e2bErrors) finish() {
	if w.status == 0 {
		return
	}
	var p v1.Problem
	json.Unmarshal(w.body.Bytes(), &p)
	msg := cmp.Or(p.Detail, p.Title)
	if p.Field != "" && !strings.HasPrefix(msg, p.Field+":") {
		msg = p.Field + ": " + msg
	}
	if p.Code != "" {
		msg += " (" + p.Code + ")"
	}
	writeE2BError(w.ResponseWriter, w.status, "%s", msg)
}

// e2bDecode reads a control request's JSON body, at most e2bMaxBody.
// Unknown fields are allowed: the SDKs add fields as the service grows,
// and those execbox must refuse are named in the wire types.
func (s *Server) e2bDecode(w http.ResponseWriter, r *http.Request, v any) error {
	return s.e2bDecodeLimit(w, r, v, e2bMaxBody)
}

// e2bDecodeLimit is e2bDecode with a bound of limit bytes.
func (s *Server) e2bDecodeLimit(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	defer rc.SetReadDeadline(time.Time{})
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return s.decodeError(w, err, limit)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return invalidField("", "the body is not this call's JSON: %v", err)
	}
	return nil
}

// e2bSpec is the session a create asks for, or why execbox refuses it.
func (s *Server) e2bSpec(req *e2b.NewSandbox) (sandbox.Spec, time.Duration, error) {
	var spec sandbox.Spec
	switch req.TemplateID {
	case "", e2b.DefaultTemplate, e2b.CodeInterpreterTemplate:
	default:
		return spec, 0, invalidField("templateID", "template %q is unknown: execbox serves %s and %s (the host view) until images are in execbox",
			req.TemplateID, e2b.DefaultTemplate, e2b.CodeInterpreterTemplate)
	}
	given := func(raw json.RawMessage) bool {
		v := string(bytes.TrimSpace(raw))
		return v != "" && v != "null" && v != "[]" && v != "{}"
	}
	for _, f := range []struct {
		name  string
		asked bool
	}{
		{"allow_internet_access", req.AllowInternetAccess != nil && *req.AllowInternetAccess},
		{"network", given(req.Network)},
		{"autoPause", req.AutoPause != nil && *req.AutoPause},
		{"autoPauseMemory", given(req.AutoPauseMemory)},
		{"autoResume", given(req.AutoResume)},
		{"volumeMounts", given(req.VolumeMounts)},
		{"mcp", given(req.MCP)},
		{"iam", given(req.IAM)},
	} {
		if !f.asked {
			continue
		}
		why := "not in execbox yet"
		if f.name == "allow_internet_access" || f.name == "network" {
			why = "an execbox sandbox has no network until egress policies are in execbox; leave it out or false"
		}
		return spec, 0, invalidField(f.name, "%s", why)
	}
	timeout := e2bDefaultTimeout
	if req.Timeout != nil {
		if *req.Timeout < 1 {
			return spec, 0, invalidField("timeout", "give at least 1 second")
		}
		timeout = time.Duration(min(*req.Timeout, int64(100*365*24*time.Hour/time.Second))) * time.Second
	}
	if err := sandbox.CheckEnv(req.EnvVars); err != nil {
		return spec, 0, &v1.FieldError{Field: "envVars", Err: err}
	}
	spec.Env = req.EnvVars
	// Processes run as long as their own timeouts say, up to the longest
	// wall limit a request may ask for.
	spec.Limits.Wall = s.opts.Engine.Maxima().Wall
	return spec, timeout, nil
}

// e2bCreate is POST /e2b/sandboxes (and /v2): a session whose agent runs,
// and its access token.
func (s *Server) e2bCreate(w http.ResponseWriter, r *http.Request) {
	x := s.begin(r, v1.OpSession)
	defer x.end()
	if !x.admit(w) {
		return
	}
	var req e2b.NewSandbox
	if err := s.e2bDecode(w, r, &req); err != nil {
		x.fail(w, err)
		return
	}
	spec, timeout, err := s.e2bSpec(&req)
	if err != nil {
		x.fail(w, err)
		return
	}
	var sel sandbox.Selection
	if !x.check(w, guard.Call{}, &sel) {
		return
	}
	ttl, idle := s.opts.Engine.SessionMaxima()
	if timeout > ttl {
		x.fail(w, invalidField("timeout", "%s is past a sandbox's longest life, sessions.max_ttl %s", timeout, ttl))
		return
	}
	owner := s.owner(x.info.identity)
	sess, err := s.opts.Engine.OpenSession(r.Context(), owner, engine.SessionRequest{
		Selection: sel, Spec: spec, TTL: ttl, Idle: idle, Labels: req.Metadata})
	if err != nil {
		x.fail(w, err)
		return
	}
	info := sess.Info()
	if err := sess.Start(r.Context()); err != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Minute)
		defer cancel()
		s.opts.Engine.CloseSession(ctx, owner, info.ID)
		x.fail(w, err)
		return
	}
	var tok [24]byte
	rand.Read(tok[:])
	sb := &e2bSandbox{id: info.ID, identity: x.info.identity, owner: owner, token: hex.EncodeToString(tok[:]),
		template: cmp.Or(req.TemplateID, e2b.DefaultTemplate), started: info.Created, procs: map[uint32]*e2bProc{},
		contexts: map[string]string{}}
	sb.timer = time.AfterFunc(timeout, func() { s.e2bExpire(sb) })
	if err := sb.setEnd(timeout, info, false); err != nil {
		sb.timer.Stop()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Minute)
		defer cancel()
		s.opts.Engine.CloseSession(ctx, owner, info.ID)
		x.fail(w, err)
		return
	}
	s.e2b.mu.Lock()
	s.e2b.m[sb.id] = sb
	s.e2b.mu.Unlock()
	x.entry.Backend, x.entry.Isolation, x.entry.Reason = info.Backend, info.Isolation.String(), engine.SessionCreated
	x.entry.Session = info.ID
	x.entry.Limits = &info.Limits
	x.info.attrs = append(x.info.attrs, sessionAttr(info.ID))
	x.end()
	writeJSON(w, http.StatusCreated, sb.wire())
}

// e2bExpire closes a sandbox whose timeout passed.
func (s *Server) e2bExpire(sb *e2bSandbox) {
	sb.mu.Lock()
	early := time.Until(sb.end) > 0
	sb.mu.Unlock()
	if early { // moved by a setTimeout that raced the timer
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.opts.Engine.CloseSession(ctx, sb.owner, sb.id); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		s.log.Error("closing an E2B sandbox at its timeout", "session", sb.id, "err", err)
	}
	s.e2b.forget(sb.id)
}

func (sb *e2bSandbox) wire() e2b.Sandbox {
	return e2b.Sandbox{TemplateID: sb.template, SandboxID: sb.id, ClientID: e2b.ClientID, EnvdVersion: e2b.EnvdVersion,
		EnvdAccessToken: sb.token, TrafficAccessToken: sb.token}
}

func (sb *e2bSandbox) listed(info engine.SessionInfo) e2b.ListedSandbox {
	sb.mu.Lock()
	end := sb.end
	sb.mu.Unlock()
	meta := info.Labels
	if meta == nil {
		meta = map[string]string{}
	}
	return e2b.ListedSandbox{TemplateID: sb.template, SandboxID: sb.id, ClientID: e2b.ClientID, StartedAt: info.Created,
		EndAt: end, CPUCount: max(1, int(math.Ceil(info.Limits.CPUs))), MemoryMB: info.Limits.Memory / sandbox.MiB,
		DiskSizeMB: info.Limits.WorkSize / sandbox.MiB, Metadata: meta, State: e2b.StateRunning, EnvdVersion: e2b.EnvdVersion,
		VolumeMounts: []struct{}{}}
}

// e2bFind is the caller's sandbox {sandboxID} and its session: another
// token's is not found, as for sessions.
func (s *Server) e2bFind(r *http.Request) (*e2bSandbox, *engine.Session, error) {
	id := r.PathValue("sandboxID")
	infoOf(r.Context()).attrs = append(infoOf(r.Context()).attrs, sessionAttr(id))
	notFound := sandbox.Errorf(sandbox.ErrNotFound, "sandbox_not_found", "sandbox %s not found", id)
	sb, ok := s.e2b.get(id)
	if !ok {
		return nil, nil, notFound
	}
	sess, err := s.opts.Engine.Session(s.owner(infoOf(r.Context()).identity), id)
	if err != nil {
		return nil, nil, notFound
	}
	return sb, sess, nil
}

// e2bList is GET /e2b/sandboxes (and /v2): the caller's sandboxes, those
// whose metadata hold every pair of the metadata query, limit per page.
func (s *Server) e2bList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	want, err := e2bMetadata(q.Get("metadata"))
	if err != nil {
		writeProblem(w, r, problemOf(r, invalidField("metadata", "give key=value pairs joined by &, URL-encoded: %v", err)))
		return
	}
	limit := e2bMaxList
	if l := q.Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > e2bMaxList {
			writeProblem(w, r, problemOf(r, invalidField("limit", "give 1…%d", e2bMaxList)))
			return
		}
	}
	skip := 0
	if t := q.Get("nextToken"); t != "" {
		if skip, err = strconv.Atoi(t); err != nil || skip < 0 {
			writeProblem(w, r, problemOf(r, invalidField("nextToken", "give the X-Next-Token of the last page")))
			return
		}
	}
	states := strings.Split(q.Get("state"), ",")
	running := q.Get("state") == "" || slices.Contains(states, e2b.StateRunning)
	owner := s.owner(infoOf(r.Context()).identity)
	out := []e2b.ListedSandbox{}
	n := 0
	for _, sb := range s.e2b.list() {
		sess, err := s.opts.Engine.Session(owner, sb.id)
		if err != nil || !running {
			continue
		}
		info := sess.Info()
		if !labelsHold(info.Labels, want) {
			continue
		}
		if n++; n <= skip {
			continue
		}
		if len(out) == limit {
			w.Header().Set(e2b.HeaderNextToken, strconv.Itoa(skip+limit))
			break
		}
		out = append(out, sb.listed(info))
	}
	writeJSON(w, http.StatusOK, out)
}

// e2bMetadata reads a list's metadata filter: the SDKs encode each key
// and value, then the pairs as a query, so each is decoded twice.
func e2bMetadata(q string) (url.Values, error) {
	pairs, err := url.ParseQuery(q)
	if err != nil {
		return nil, err
	}
	out := url.Values{}
	for k, vs := range pairs {
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			val, err := url.QueryUnescape(v)
			if err != nil {
				return nil, err
			}
			out.Add(key, val)
		}
	}
	return out, nil
}

func labelsHold(have map[string]string, want url.Values) bool {
	for k, vs := range want {
		for _, v := range vs {
			if have[k] != v {
				return false
			}
		}
	}
	return true
}

// e2bGet is GET /e2b/sandboxes/{sandboxID}.
func (s *Server) e2bGet(w http.ResponseWriter, r *http.Request) {
	sb, sess, err := s.e2bFind(r)
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	d := e2b.Detail{ListedSandbox: sb.listed(sess.Info())}
	if s.e2bOwns(r, sb) {
		d.EnvdAccessToken = sb.token
	}
	writeJSON(w, http.StatusOK, d)
}

// e2bKill is DELETE /e2b/sandboxes/{sandboxID}: 204; one not found is 404.
func (s *Server) e2bKill(w http.ResponseWriter, r *http.Request) {
	sb, _, err := s.e2bFind(r)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Minute)
		defer cancel()
		err = s.opts.Engine.CloseSession(ctx, s.owner(infoOf(r.Context()).identity), sb.id)
	}
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	s.e2b.forget(sb.id)
	w.WriteHeader(http.StatusNoContent)
}

// e2bTimeout reads the timeout of a setTimeout or a connect: nil when
// the body names none.
func (s *Server) e2bTimeout(w http.ResponseWriter, r *http.Request, required bool) (*time.Duration, error) {
	var t e2b.Timeout
	if err := s.e2bDecode(w, r, &t); err != nil {
		return nil, err
	}
	switch {
	case t.Timeout == nil && required:
		return nil, invalidField("timeout", "give the seconds the sandbox lives from now")
	case t.Timeout == nil:
		return nil, nil
	case *t.Timeout < 1:
		return nil, invalidField("timeout", "give at least 1 second")
	}
	d := time.Duration(min(*t.Timeout, int64(100*365*24*time.Hour/time.Second))) * time.Second
	return &d, nil
}

// e2bSetTimeout is POST /e2b/sandboxes/{sandboxID}/timeout: the sandbox
// now ends timeout seconds from now (within its session's life); 204.
func (s *Server) e2bSetTimeout(w http.ResponseWriter, r *http.Request) {
	sb, sess, err := s.e2bFind(r)
	var d *time.Duration
	if err == nil {
		d, err = s.e2bTimeout(w, r, true)
	}
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	if err := sb.setEnd(*d, sess.Info(), false); err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// e2bConnect is POST /e2b/sandboxes/{sandboxID}/connect (and /v2): the
// sandbox and its access token, for its owner only; its end moves to the
// timeout from now (e2bDefaultTimeout when none is given) when that is
// later — a connect never shortens a sandbox's life.
func (s *Server) e2bConnect(w http.ResponseWriter, r *http.Request) {
	sb, sess, err := s.e2bFind(r)
	var d *time.Duration
	if err == nil {
		d, err = s.e2bTimeout(w, r, false)
	}
	if err == nil && !s.e2bOwns(r, sb) {
		err = sandbox.Errorf(sandbox.ErrDenied, "not_the_owner", "sandbox %s is token %s's: an admin may see and kill it, not act in it", sb.id, sb.owner.Name)
	}
	if err == nil {
		err = sb.setEnd(*cmp.Or(d, new(time.Duration(e2bDefaultTimeout))), sess.Info(), true)
	}
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	writeJSON(w, http.StatusOK, sb.wire())
}

// e2bOwns says whether the caller is the token that made sb: only it is
// given the access token (an admin sees every sandbox, but its calls
// into one would act as, and be audited as, the owner).
func (s *Server) e2bOwns(r *http.Request, sb *e2bSandbox) bool {
	return s.owner(infoOf(r.Context()).identity).Name == sb.owner.Name
}
