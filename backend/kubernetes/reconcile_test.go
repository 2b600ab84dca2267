package kubernetes

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/host/owner"
	"github.com/execbox/execbox/sandbox"
)

const helperEnv = "EXECBOX_K8S_TEST_HELPER"

// TestHelperHoldsSandboxes is the process TestKill9LeavesNoPods kills: it
// makes two sandboxes, starts a program in one, says so, and waits.
func TestHelperHoldsSandboxes(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("run by TestKill9LeavesNoPods")
	}
	b := newBackend(t, "kubernetes", nil)
	ctx := context.Background()
	var ids []string
	for range 2 {
		sb, err := b.Create(ctx, sandbox.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID())
		if len(ids) == 1 {
			go sb.Exec(ctx, &sandbox.Process{Args: []string{"sleep", "1000"}})
		}
	}
	// The second Create took the Pod the first one's refill started; the
	// next is on its way.
	for deadline := time.Now().Add(time.Minute); b.pool.Len() == 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("holding %s\n", strings.Join(ids, " "))
	select {}
}

// TestKill9LeavesNoPods: an execbox killed with -9 while it holds sandbox
// Pods (one running a program, one idle, one warm) leaves none behind: its
// attaches end, the agents exit, the Pods end, and the next start's
// Reconcile deletes them.
func TestKill9LeavesNoPods(t *testing.T) {
	b := newBackend(t, "kubernetes", nil)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldsSandboxes$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "EXECBOX_K8S_TEST_NS="+testNS)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(out)
	var ids []string
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "holding "); ok {
			ids = strings.Fields(rest)
			break
		}
	}
	if len(ids) != 2 {
		t.Fatalf("the helper did not make its sandboxes (%v)", lines.Err())
	}
	// Its Pods run, a warm one besides its sandboxes'.
	live := map[string]bool{}
	for _, p := range pods(t, b) {
		live[p.Name] = p.Status.Phase == "Running"
	}
	for _, id := range ids {
		if !live["execbox-"+id] {
			t.Fatalf("the helper's Pod execbox-%s does not run: %v", id, live)
		}
	}
	if len(live) < 3 {
		t.Fatalf("the helper keeps no warm Pod: %v", live)
	}
	cmd.Process.Kill()
	cmd.Wait()

	// A new execbox starts: its Reconcile (the engine's, at start and at
	// every probe interval) leaves none of them.
	next := newBackend(t, "kubernetes", nil)
	deadline := time.Now().Add(60 * time.Second)
	for {
		removed, err := next.Reconcile(context.Background())
		if err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		if len(removed) > 0 {
			t.Logf("Reconcile removed %v", removed)
		}
		// Its sandboxes' Pods, and the warm Pod it kept.
		left := []string{}
		for _, p := range pods(t, next) {
			if o, ok := owner.Parse(p.Annotations[AnnotationOwner]); ok && o.PID == cmd.Process.Pid {
				left = append(left, p.Name+" ("+string(p.Status.Phase)+")")
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("60 s after the kill, the dead execbox's Pods are still there: %v", left)
		}
		time.Sleep(time.Second)
	}
}
