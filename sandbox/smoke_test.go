package sandbox

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// scripted is a backend whose one Exec answers with a fixed result.
type scripted struct{ res Result }

func (s *scripted) Name() string                                  { return "scripted" }
func (s *scripted) Capabilities() Capabilities                    { return Capabilities{} }
func (s *scripted) Health(context.Context) Health                 { return Health{} }
func (s *scripted) Create(context.Context, Spec) (Sandbox, error) { return &scriptedBox{s}, nil }

type scriptedBox struct{ s *scripted }

func (b *scriptedBox) ID() string                                          { return "x" }
func (b *scriptedBox) WriteFiles(context.Context, map[string][]byte) error { return nil }
func (b *scriptedBox) Artifacts(context.Context) (Artifacts, error)        { return Artifacts{}, nil }
func (b *scriptedBox) Close(context.Context) error                         { return nil }
func (b *scriptedBox) Exec(context.Context, *Process) (*Result, error) {
	r := b.s.res
	return &r, nil
}

// TestSmokeVerdicts: how Smoke reads each outcome (the script itself runs
// for real in every backend's health tests).
func TestSmokeVerdicts(t *testing.T) {
	var burst strings.Builder
	for i := range smokeLines {
		burst.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	for _, c := range []struct {
		name string
		res  Result
		ok   bool
		want string
	}{
		{"passes", Result{Reason: ReasonExited, Stdout: burst.String()}, true, ""},
		{"names the check and why", Result{Reason: ReasonExited, ExitCode: 1,
			Stderr: "ls: cannot access '/work': Invalid argument\nsmoke check list_dir failed\n"}, false,
			"smoke check list_dir failed: ls: cannot access '/work': Invalid argument"},
		{"names the check", Result{Reason: ReasonExited, ExitCode: 1, Stderr: "smoke check fork_wait failed\n"}, false, "smoke check fork_wait failed"},
		{"lost lines", Result{Reason: ReasonExited, Stdout: "line 0\n"}, false, "output_burst failed: 1 of 10000"},
		{"truncated", Result{Reason: ReasonExited, Stdout: burst.String(), StdoutTruncated: true}, false, "output_burst"},
		{"timeout", Result{Reason: ReasonTimeout, ExitCode: -1, Message: "killed at 20s"}, false, "ended timeout (exit -1): killed at 20s"},
	} {
		ok, why := Smoke(context.Background(), &scripted{c.res}, Spec{})
		if ok != c.ok || !strings.Contains(why, c.want) {
			t.Errorf("%s: ok %v, reason %q; want %v, %q", c.name, ok, why, c.ok, c.want)
		}
	}
}
