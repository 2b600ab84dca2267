package client

import (
	"context"
	"net/http"
	"net/url"

	v1 "github.com/execbox/execbox/api/v1"
)

// Approvals lists the executions a guard rule holds for a decision,
// oldest first (admin tokens).
func (c *Client) Approvals(ctx context.Context) ([]v1.Approval, error) {
	var a v1.Approvals
	if err := c.do(ctx, http.MethodGet, "/v1/approvals", nil, nil, &a); err != nil {
		return nil, err
	}
	return a.Approvals, nil
}

// Decide approves a held execution (it runs) or denies it (its caller
// gets approval_denied with reason). Admin tokens.
func (c *Client) Decide(ctx context.Context, id string, approve bool, reason string) error {
	resp, err := c.send(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id), nil, v1.Decision{Approve: &approve, Reason: reason}, "application/json")
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}
