package client

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/internal/daemon/server"
	"github.com/execbox/execbox/sandbox"
)

// A held run is listed and decided through the client; the run's caller
// gets the decision.
func TestApprovals(t *testing.T) {
	// One token runs and decides: it may approve its own calls.
	g, err := guard.New(guard.Config{Rules: []guard.Rule{{Name: "ask", Action: guard.Confirm, Operations: []string{"run"}}},
		Approvals: guard.Approvals{SelfApprove: true}})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, serve(t, func(o *server.Options) { o.Guard = g }), WithToken("secret"))
	ctx := context.Background()
	for _, approve := range []bool{true, false} {
		done := make(chan error, 1)
		go func() {
			_, err := c.Run(ctx, &v1.RunRequest{Command: []string{"true"}})
			done <- err
		}()
		var list []v1.Approval
		for deadline := time.Now().Add(5 * time.Second); len(list) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if list, err = c.Approvals(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if len(list) != 1 || list[0].Rule != "ask" || list[0].Operation != "run" {
			t.Fatalf("approvals %+v", list)
		}
		if err := c.Decide(ctx, list[0].ID, approve, "why not"); err != nil {
			t.Fatal(err)
		}
		err := <-done
		if approve && err != nil || !approve && (!errors.Is(err, sandbox.ErrDenied) || sandbox.CodeOf(err) != guard.CodeApprovalDenied) {
			t.Errorf("approve=%v: the run's answer: %v", approve, err)
		}
		if err := c.Decide(ctx, list[0].ID, true, ""); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("deciding again: %v", err)
		}
	}
}
