package sandbox

import (
	"context"
	"errors"
	"time"
)

// Run is a one-shot run: Create → WriteFiles (spec.Files) → Exec →
// Artifacts → Close. The sandbox is closed whatever happens; a Close error
// is returned only when everything else succeeded.
func Run(ctx context.Context, b Backend, spec Spec, p *Process) (res *Result, err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	sb, err := b.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return RunIn(ctx, sb, spec, p)
}

// RunIn is the rest of a one-shot run in sb, just created for spec:
// WriteFiles (spec.Files) → Exec → Artifacts → Close, sb closed whatever
// happens (a Close error returned only when everything else succeeded).
func RunIn(ctx context.Context, sb Sandbox, spec Spec, p *Process) (res *Result, err error) {
	defer func() {
		// Close must run even when ctx is already done: cleanup is not optional.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if cerr := sb.Close(cctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if len(spec.Files) > 0 {
		if err := sb.WriteFiles(ctx, spec.Files); err != nil {
			return nil, err
		}
	}
	res, err = sb.Exec(ctx, p)
	if err != nil {
		return nil, err
	}
	arts, aerr := sb.Artifacts(context.WithoutCancel(ctx))
	if aerr != nil {
		return res, errors.Join(Errorf(ErrInternal, "artifacts_failed", "collecting artifacts: %w", aerr))
	}
	res.Artifacts, res.Skipped = arts.Files, arts.Skipped
	return res, nil
}
