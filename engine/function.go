package engine

import (
	"context"

	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/sandbox"
)

// FunctionRunner returns the function.Runner that runs function calls
// through the engine: each call's backend, tier and min_isolation (carried
// by the function executor in the context) select the backend as for any
// other run, so a function never runs with less isolation than a command.
func (e *Engine) FunctionRunner() function.Runner {
	return function.RunnerFunc(func(ctx context.Context, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error) {
		sel, _ := function.SelectionFrom(ctx)
		return e.Run(ctx, Selection{Backend: sel.Backend, Tier: sel.Tier, MinIsolation: sel.MinIsolation}, spec, p)
	})
}
