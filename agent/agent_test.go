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
	return swapped{localSandbox(t), args}
}

// localSandbox is a sandbox of the local backend (python3 on the host),
// closed when the test ends.
func localSandbox(t *testing.T) sandbox.Sandbox {
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
	return sb
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
		"not_json":  `echo '{"ready":true,"subreaper":true}'; read -r _; read -r _; echo garbage; sleep 60`,
		"too_long":  `echo '{"ready":true,"subreaper":true}'; read -r _; read -r _; head -c 5000000 /dev/zero | tr '\0' x; echo; sleep 60`,
		"ends":      `echo '{"ready":true,"subreaper":true}'; read -r _; read -r _; exit 0`,
		"truncated": `echo '{"ready":true,"subreaper":true}'; read -r _; read -r _; printf '{"id":'; exit 0`,
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
	sb := sandboxWith(t, "sh", "-c", `echo '{"ready":true,"subreaper":true}'; exec sleep 60`)
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

// A real agent on the local backend (python3 on the host).
func realAgent(t *testing.T) *agent.Agent {
	t.Helper()
	a, err := agent.Start(t.Context(), localSandbox(t), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// stopAgent has a context of a stop its agent (SIGSTOP), as a program in
// the sandbox can.
func stopAgent(t *testing.T, a *agent.Agent) {
	t.Helper()
	if err := a.NewContext(t.Context(), "stopper", "python"); err != nil {
		t.Fatal(err)
	}
	res, err := a.RunCode(t.Context(), "stopper", "import os, signal, threading\n"+
		"threading.Timer(0.2, lambda: os.kill(os.getppid(), signal.SIGSTOP)).start()", 5*time.Second, 1024, nil, nil)
	if err != nil || !res.OK {
		t.Fatalf("arming the stop: %+v, %v", res, err)
	}
	time.Sleep(time.Second) // the timer fires 0.2 s after the call
}

// A stopped agent (finding 2 of issue 33): a request it cannot take (a
// 100 KB env fills its input pipe) ends it within the exec's wall limit and
// a moment (agent_lost), instead of holding the caller, and everything that
// waited on it is freed.
func TestWedgedAgent(t *testing.T) {
	for name, env := range map[string]string{"large_request": strings.Repeat("x", 100_000), "small_request": "x"} {
		t.Run(name, func(t *testing.T) {
			a := realAgent(t)
			stopAgent(t, a)
			wall := 2 * time.Second
			start := time.Now()
			_, err := a.Exec(t.Context(), &sandbox.Process{Args: []string{"true"}, Env: map[string]string{"BIG": env}}, sandbox.Limits{Wall: wall, Output: 1024})
			took := time.Since(start)
			if sandbox.CodeOf(err) != agent.CodeAgentLost {
				t.Fatalf("an exec on a stopped agent: %v", err)
			}
			t.Logf("the exec (wall %v) returned %v after it began: %v", wall, took.Round(time.Millisecond), err)
			select {
			case <-a.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the stopped agent was not ended")
			}
			if _, err := a.RunCode(t.Context(), "stopper", "1", time.Second, 1024, nil, nil); sandbox.CodeOf(err) != agent.CodeAgentLost {
				t.Fatalf("a call after the agent was ended: %v", err)
			}
		})
	}
}

// An agent that is not its programs' subreaper could not end a tree that
// left its process group: it is refused.
func TestStartWithoutSubreaper(t *testing.T) {
	sb := sandboxWith(t, "sh", "-c", `echo '{"ready":true}'; exec sleep 60`)
	_, err := agent.Start(t.Context(), sb, time.Minute)
	if sandbox.CodeOf(err) != "agent_unavailable" || !strings.Contains(err.Error(), "subreaper") {
		t.Fatalf("Start: %v", err)
	}
}
