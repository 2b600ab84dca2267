package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// recorder is a Backend that records what sandbox.Run asks of it. Run's
// own checks are the subject here, not isolation: the backends' are the
// conformance suite's.
type recorder struct{ calls []string }

func (r *recorder) Name() string                  { return "recorder" }
func (r *recorder) Capabilities() Capabilities    { return Capabilities{} }
func (r *recorder) Health(context.Context) Health { return Health{Available: true} }
func (r *recorder) Create(context.Context, Spec) (Sandbox, error) {
	r.calls = append(r.calls, "create")
	return &recorded{r}, nil
}

type recorded struct{ r *recorder }

func (s *recorded) ID() string { return "rec" }
func (s *recorded) WriteFiles(context.Context, map[string][]byte) error {
	s.r.calls = append(s.r.calls, "write")
	return nil
}
func (s *recorded) Exec(context.Context, *Process) (*Result, error) {
	s.r.calls = append(s.r.calls, "exec")
	return &Result{Reason: ReasonExited}, nil
}
func (s *recorded) Artifacts(context.Context) (Artifacts, error) {
	s.r.calls = append(s.r.calls, "artifacts")
	return Artifacts{}, nil
}
func (s *recorded) Close(context.Context) error {
	s.r.calls = append(s.r.calls, "close")
	return nil
}

// Run refuses a Spec whose Files hold an invalid path before it asks the
// backend for anything: ErrInvalid naming the path, no sandbox made, no
// program run.
func TestRunRefusesBadSpecFiles(t *testing.T) {
	for _, p := range []string{"/etc/x", "../x", "a/../../x", "a\x00b", strings.Repeat("c", 256), "", "./x", "a//b", "a/"} {
		r := &recorder{}
		_, err := Run(t.Context(), r, Spec{Files: map[string][]byte{p: []byte("x")}}, &Process{Args: []string{"true"}})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"`) {
			t.Errorf("Run with Spec.Files path %.40q: %v, want ErrInvalid naming the path", p, err)
		}
		if len(r.calls) != 0 {
			t.Errorf("Run with Spec.Files path %.40q asked the backend for %v", p, r.calls)
		}
	}
	r := &recorder{}
	if _, err := Run(t.Context(), r, Spec{Files: map[string][]byte{"ok.txt": []byte("x")}}, &Process{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.calls, " "); got != "create write exec artifacts close" {
		t.Fatalf("Run's calls: %s", got)
	}
}

func TestEnding(t *testing.T) {
	for want, r := range map[string]Result{
		"exit status 2: no runner":                     {Reason: ReasonExited, ExitCode: 2, Stderr: "no runner\n"},
		"timeout (SIGKILL): wall limit 1s":             {Reason: ReasonTimeout, Signal: "SIGKILL", Message: "wall limit 1s"},
		"sandbox_error: …" + strings.Repeat("x", 1024): {Reason: ReasonSandboxError, Stderr: strings.Repeat("x", 2000)},
	} {
		if got := r.Ending(); got != want {
			t.Errorf("%+v: %q, want %q", r, got, want)
		}
	}
}
