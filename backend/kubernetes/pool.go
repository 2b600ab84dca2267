package kubernetes

import (
	"context"
	"fmt"

	"github.com/execbox/execbox/sandbox"
)

// shape is what a Pod is made of before its sandbox is set up: a warm
// Pod serves only a spec of its shape.
type shape struct {
	image             string
	memory, work, tmp int64
	cpus              float64
}

// shapeOf is spec's shape (its limits with defaults), or false for a spec
// whose Pod carries something of its own (a session label).
func shapeOf(spec sandbox.Spec) (shape, bool) {
	l := spec.Limits
	return shape{spec.Image, l.Memory, l.WorkSize, l.TmpSize, l.CPUs}, spec.Labels["session"] == ""
}

// Warm says what the pool holds per shape and why (sandbox.Warmer).
func (b *Backend) Warm() []sandbox.Warm {
	return b.pool.Report(func(s shape) string {
		image := s.image
		if image == "" {
			image = b.cfg.Image
		}
		return fmt.Sprintf("%s, memory %s, cpus %g, work %s, tmp %s", image,
			sandbox.FormatSize(s.memory), s.cpus, sandbox.FormatSize(s.work), sandbox.FormatSize(s.tmp))
	})
}

// warmPod is a started Pod whose agent waits for its one sandbox.
type warmPod struct {
	p  *pod
	id string
}

func (w warmPod) alive() bool { return !w.p.ended() }
func (w warmPod) kill()       { w.p.kill() }

// startWarm starts a Pod of spec's shape for the pool.
func (b *Backend) startWarm(spec sandbox.Spec) func(context.Context) (warmPod, error) {
	spec = sandbox.Spec{Image: spec.Image, Limits: spec.Limits}
	return func(ctx context.Context) (warmPod, error) {
		id := sandbox.NewID()
		p, err := b.start(ctx, spec, id)
		return warmPod{p, id}, err
	}
}
