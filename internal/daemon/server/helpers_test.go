package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	v1 "github.com/execbox/execbox/api/v1"
	_ "github.com/execbox/execbox/backend/local"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/daemon/mcpserver"
	"github.com/execbox/execbox/sandbox"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// required reports whether EXECBOX_REQUIRE lists feature or "server",
// which turns a missing prerequisite from a skip into a failure.
func required(feature string) bool {
	for _, f := range strings.FieldsFunc(os.Getenv("EXECBOX_REQUIRE"), func(r rune) bool { return r == ',' || r == ' ' }) {
		if f == feature || f == "server" {
			return true
		}
	}
	return false
}

// requirePython skips (or fails, when required) without python3: the
// function protocol's runner needs it.
func requirePython(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if required("python3") {
			t.Fatalf("python3 is required (EXECBOX_REQUIRE) but not found: %v", err)
		}
		t.Skipf("python3 not found: %v", err)
	}
}

// env is a server over the real engine with the local backend (the
// server's behaviour does not depend on isolation), a real function
// executor and a real audit log, listening on loopback.
type env struct {
	t       testing.TB
	srv     *Server
	http    *httptest.Server
	audit   *audit.Store
	workDir string
	logs    *lockedWriter
}

type setup struct {
	tokens        []auth.Token
	publicMetrics bool
	authLimits    auth.Limits // failure bounds
	maxima        sandbox.Limits
	resultMemory  int64
	backends      []string // besides local
	options       func(*Options)
	limits        auth.Limits
	maxBody       int64
	maxRuns       int
	ownerRuns     int
	fnConc        int
	fnQueue       time.Duration
	noAudit       bool
	engineOff     bool
	replica       string // the engine's SessionOptions.Replica
}

func newEnv(t testing.TB, s setup) *env {
	t.Helper()
	work := t.TempDir()
	backend := "local"
	if s.engineOff {
		backend = "off"
	}
	e, err := engine.New(engine.Options{
		Backend:         backend,
		AllowUnisolated: true,
		Backends:        append([]string{"local"}, s.backends...),
		MaxRuns:         s.maxRuns,
		OwnerRuns:       s.ownerRuns,
		Max:             s.maxima,
		ResultMemory:    s.resultMemory,
		Sessions:        engine.SessionOptions{Replica: s.replica},
		Settings: func(string) sandbox.Settings {
			return sandbox.Settings{WorkRoot: work, StateDir: t.TempDir(), Instance: "server-test", Defaults: sandbox.Defaults}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	t.Cleanup(e.Close)
	lim := s.limits
	lim.FailureRate, lim.FailureBurst = s.authLimits.FailureRate, s.authLimits.FailureBurst
	a, err := auth.New(s.tokens, lim)
	if err != nil {
		t.Fatal(err)
	}
	en := &env{t: t, workDir: work, logs: &lockedWriter{w: &bytes.Buffer{}}}
	if !s.noAudit {
		en.audit, err = audit.Open(filepath.Join(t.TempDir(), "audit.db"), audit.Options{StoreCode: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { en.audit.Close() })
	}
	fx, err := function.New(function.EngineFunc(e.Call), function.Options{Concurrency: s.fnConc, QueueTimeout: s.fnQueue})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		Engine: e, Functions: fx, Auth: a, Audit: en.audit, MaxBody: s.maxBody, PublicMetrics: s.publicMetrics,
		Logger: slog.New(slog.NewJSONHandler(en.logs, nil)),
		MCP: func(api http.Handler) http.Handler {
			return mcpserver.HTTPHandler(mcpserver.New(mcpserver.Options{API: api}))
		},
	}
	if s.options != nil {
		s.options(&o)
	}
	en.srv, err = New(o)
	if err != nil {
		t.Fatal(err)
	}
	en.http = httptest.NewServer(en.srv.Handler())
	t.Cleanup(en.http.Close)
	return en
}

// lockedWriter serialises log writes from concurrent handlers.
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// answer is a raw HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) problem(t testing.TB) v1.Problem {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != v1.ContentTypeProblem {
		t.Fatalf("Content-Type %q, want %s; body %s", ct, v1.ContentTypeProblem, a.body)
	}
	var p v1.Problem
	if err := json.Unmarshal(a.body, &p); err != nil {
		t.Fatalf("decoding problem %s: %v", a.body, err)
	}
	if p.Status != a.status || p.Type != v1.ProblemTypePrefix+p.Code || p.Title == "" || p.RequestID == "" {
		t.Fatalf("problem %+v does not match status %d", p, a.status)
	}
	return p
}

// do sends a request with body (a string, or a value encoded as JSON).
func (en *env) do(method, path string, body any, header ...string) answer {
	en.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			en.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, en.http.URL+path, rd)
	if err != nil {
		en.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		switch {
		case header[i] == "Host":
			req.Host = header[i+1]
		case header[i+1] == "":
			req.Header.Del(header[i]) // as curl -H 'Name:'
		default:
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := en.http.Client().Do(req)
	if err != nil {
		en.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		en.t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, b}
}

// auditCount is how many audit rows there are.
func (en *env) auditCount() int {
	en.t.Helper()
	_, total, err := en.audit.Query(context.Background(), audit.Query{})
	if err != nil {
		en.t.Fatal(err)
	}
	return total
}

// auditRuns and auditAuth filter the audit log by kind.
func auditRuns() audit.Query { return audit.Query{Operation: string(v1.OpRun), Limit: audit.MaxLimit} }
func auditAuth() audit.Query { return audit.Query{Operation: audit.OpAuth, Limit: audit.MaxLimit} }
