package function

import (
	"context"
	"testing"

	"github.com/execbox/execbox/sandbox"
)

// The configured policy (run_as_user, the env allowlist) reaches every
// call's sandbox, as it does a command's.
func TestPolicyReachesTheSandbox(t *testing.T) {
	want := sandbox.Policy{RunAsUser: "fnuser", EnvAllowlist: []string{"FOO"}}
	var got sandbox.Spec
	r := RunnerFunc(func(_ context.Context, spec sandbox.Spec, _ *sandbox.Process) (*sandbox.Result, error) {
		got = spec
		return nil, sandbox.Errorf(sandbox.ErrUnavailable, "backend_unavailable", "stop here")
	})
	x, err := New(r, Options{Policy: want})
	if err != nil {
		t.Fatal(err)
	}
	resp := x.Execute(context.Background(), &Request{Code: "def main():\n    return 1\n"})
	if resp.OK || resp.Code != CodeIsolationUnavailable {
		t.Fatalf("response %+v", resp)
	}
	if got.Policy.RunAsUser != "fnuser" || len(got.Policy.EnvAllowlist) != 1 {
		t.Fatalf("policy in the sandbox spec = %+v, want %+v", got.Policy, want)
	}
}
