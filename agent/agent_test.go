package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/execbox/execbox/agent"
	"github.com/execbox/execbox/backend/local"
	"github.com/execbox/execbox/sandbox"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The agent's contract on every backend is in the conformance suite
// (sandboxtest: agent/…). These tests run it on the local backend with the
// agent's program replaced, for what a real agent does not do: fail to
// start, break its protocol, flood it.

// swapped is a sandbox whose Lasting process (the agent) is another
// program.
type swapped struct {
	sandbox.Sandbox
	args []string
}

func (s swapped) Exec(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	if p.Lasting {
		q := *p
		q.Args = s.args
		p = &q
	}
	return s.Sandbox.Exec(ctx, p)
}

func sandboxWith(t *testing.T, args ...string) sandbox.Sandbox {
	t.Helper()
	b, err := local.New(sandbox.Settings{WorkRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Create(t.Context(), sandbox.Spec{Limits: sandbox.Limits{Wall: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return swapped{sb, args}
}

// A sandbox without python3 has no agent: a typed error at once.
func TestStartWithoutPython(t *testing.T) {
	sb := sandboxWith(t, "no-such-python3")
	_, err := agent.Start(t.Context(), sb, time.Minute)
	if sandbox.CodeOf(err) != "agent_unavailable" || !strings.Contains(err.Error(), "python3") {
		t.Fatalf("Start: %v", err)
	}
}

// An agent that exits before it is ready says so, with what it printed.
func TestStartFails(t *testing.T) {
	sb := sandboxWith(t, "sh", "-c", "echo broken >&2; exit 3")
	_, err := agent.Start(t.Context(), sb, time.Minute)
	if sandbox.CodeOf(err) != "agent_unavailable" || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("Start: %v", err)
	}
}

// An agent that breaks its protocol (a line that is not JSON, a line
// over the bound) is ended; every call fails with agent_lost, none hangs,
// and its Exec returns.
func TestBrokenProtocol(t *testing.T) {
	for name, script := range map[string]string{
		"not_json":  `echo '{"ready":true}'; read -r _; read -r _; echo garbage; sleep 60`,
		"too_long":  `echo '{"ready":true}'; read -r _; read -r _; head -c 5000000 /dev/zero | tr '\0' x; echo; sleep 60`,
		"ends":      `echo '{"ready":true}'; read -r _; read -r _; exit 0`,
		"truncated": `echo '{"ready":true}'; read -r _; read -r _; printf '{"id":'; exit 0`,
	} {
		t.Run(name, func(t *testing.T) {
			sb := sandboxWith(t, "sh", "-c", script)
			a, err := agent.Start(t.Context(), sb, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			start := time.Now()
			_, err = a.RunCode(t.Context(), "c", "1", 5*time.Second, 1024, nil, nil)
			if sandbox.CodeOf(err) != agent.CodeAgentLost {
				t.Fatalf("a call to a broken agent: %v", err)
			}
			if d := time.Since(start); d > 4*time.Second {
				t.Fatalf("the call took %v", d)
			}
			select {
			case <-a.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the broken agent's Exec did not end")
			}
			if _, err := a.Exec(t.Context(), &sandbox.Process{Args: []string{"true"}}, sandbox.Limits{Wall: time.Second}); sandbox.CodeOf(err) != agent.CodeAgentLost {
				t.Fatalf("an exec after the agent ended: %v", err)
			}
		})
	}
}

// An agent that does not answer a call: the caller's backstop ends it.
func TestSilentAgent(t *testing.T) {
	sb := sandboxWith(t, "sh", "-c", `echo '{"ready":true}'; exec sleep 60`)
	a, err := agent.Start(t.Context(), sb, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if _, err := a.RunCode(ctx, "c", "1", time.Second, 1024, nil, nil); err != context.DeadlineExceeded {
		t.Fatalf("a call the agent never answers, under a deadline: %v", err)
	}
}
