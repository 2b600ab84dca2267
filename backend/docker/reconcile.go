package docker

import (
	"context"
	"errors"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/execbox/execbox/internal/host/owner"
)

// Reconcile removes the containers and volumes that an earlier execbox left
// behind and nobody wants any more: those whose owner process on this
// machine is dead (a kill -9, a crash) and those past their expiry (owners
// this execbox cannot check). Containers of live execbox processes,
// including this one, are left alone. It runs once by itself on the first
// contact with the engine; call it to run it again. What it removed is
// listed as "container NAME" and "volume NAME".
func (b *Backend) Reconcile(ctx context.Context) ([]string, error) {
	var out []string
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	list, err := b.cli.ContainerList(ctx, client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", LabelOwner),
	})
	if err != nil {
		return out, b.wrap(err, "listing execbox containers")
	}
	var errs []error
	for _, c := range list.Items {
		if !b.unwanted(c.Labels) {
			continue
		}
		name := c.ID[:min(12, len(c.ID))]
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		_, err := b.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, b.wrap(err, "removing left-over container "+name))
			continue
		}
		out = append(out, "container "+name)
	}
	// Volumes whose container was removed without them.
	vols, err := b.cli.VolumeList(ctx, client.VolumeListOptions{
		Filters: make(client.Filters).Add("label", LabelOwner).Add("dangling", "true"),
	})
	if err != nil {
		errs = append(errs, b.wrap(err, "listing execbox volumes"))
	} else {
		for _, v := range vols.Items {
			if !b.unwanted(v.Labels) {
				continue
			}
			if _, err := b.cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, b.wrap(err, "removing left-over volume "+v.Name))
				continue
			}
			out = append(out, "volume "+v.Name)
		}
	}
	return out, errors.Join(errs...)
}

// unwanted reports whether an object with these labels may be removed.
func (b *Backend) unwanted(labels map[string]string) bool {
	o, ok := owner.Parse(labels[LabelOwner])
	if !ok {
		return false // not ours to judge
	}
	if o == b.me {
		return false
	}
	if o.Dead(b.me) {
		return true
	}
	exp, err := time.Parse(time.RFC3339, labels[LabelExpires])
	return err == nil && time.Now().After(exp)
}

// reconcileOnce runs Reconcile the first time the engine answers.
func (b *Backend) reconcileOnce(ctx context.Context) {
	b.mu.Lock()
	done := b.reconciled
	b.mu.Unlock()
	if done {
		return
	}
	if _, err := b.Reconcile(ctx); err == nil || !engineDown(err) {
		b.mu.Lock()
		b.reconciled = true
		b.mu.Unlock()
	}
}
