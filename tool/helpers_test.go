package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/execbox/execbox/backend/native"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// sandboxes runs tool processes on a real native backend (from the
// registry, as the engine builds it) and counts the sandboxes it starts.
type sandboxes struct {
	b       sandbox.Backend
	started atomic.Int32
}

// newSandboxes returns a native backend with its own work root, or skips
// the test (fails it under EXECBOX_REQUIRE=native) where it cannot run.
func newSandboxes(t testing.TB) *sandboxes {
	t.Helper()
	testutil.RequiresRoot(t, "native")
	r, ok := sandbox.Lookup("native")
	if !ok {
		t.Fatal("the native backend is not registered")
	}
	b, err := r.New(sandbox.Settings{WorkRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := b.(sandbox.Closer); ok {
		t.Cleanup(func() { c.Close() })
	}
	testutil.Available(t, "native", b, 30*time.Second)
	return &sandboxes{b: b}
}

func (s *sandboxes) run(ctx context.Context, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error) {
	s.started.Add(1)
	return sandbox.Run(ctx, s.b, spec, p)
}

// newSet makes a Set of the tools dirs with a runtime dir of the test's own.
func newSet(t testing.TB, dirs ...string) *Set {
	t.Helper()
	s, err := New(Options{Dirs: dirs, RuntimeDir: filepath.Join(t.TempDir(), "rt")})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// toolsDir makes a tools dir holding the given files (name → content),
// readable by the sandbox's user.
func toolsDir(t testing.TB, files map[string]string) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "tools")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// call runs a tool and fails the test on an error.
func call(t testing.TB, s *Set, sb *sandboxes, c Call) *Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := s.Run(ctx, sb.run, c)
	if err != nil {
		t.Fatalf("Run %s: %v (code %s)", c.Name, err, sandbox.CodeOf(err))
	}
	return r
}

// result decodes a successful response's result into v.
func result(t testing.TB, r *Response, v any) {
	t.Helper()
	if !r.OK {
		t.Fatalf("want ok, got error %+v\noutput: %s", r.Error, r.Output)
	}
	if err := json.Unmarshal(r.Result, v); err != nil {
		t.Fatalf("result %s: %v", r.Result, err)
	}
}

// wantErr fails unless err has kind and code.
func wantErr(t testing.TB, err error, kind *sandbox.Kind, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s error %s, got none", kind.Code(), code)
	}
	if sandbox.KindOf(err) != kind || sandbox.CodeOf(err) != code {
		t.Fatalf("want %s error %s, got %s/%s: %v", kind.Code(), code, sandbox.KindOf(err).Code(), sandbox.CodeOf(err), err)
	}
}
