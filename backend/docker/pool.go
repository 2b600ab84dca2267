package docker

import (
	"context"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// wipe empties a reused container between two sandboxes: it kills every
// process but the keeper and removes everything in /work, /tmp and
// /dev/shm (chmod first, so that directories the program made unreadable
// go too; chmod -R never follows a symlink).
var wipe = []string{"/bin/sh", "-c", `kill -9 -1 2>/dev/null; kill -9 -1 2>/dev/null
for d in /work /tmp /dev/shm; do
	chmod -R u+rwx "$d"/* "$d"/.[!.]* "$d"/..?* 2>/dev/null
	rm -rf "$d"/* "$d"/.[!.]* "$d"/..?* 2>/dev/null
done
for d in /work /tmp /dev/shm; do
	for f in "$d"/* "$d"/.[!.]* "$d"/..?*; do
		if [ -e "$f" ] || [ -L "$f" ]; then echo "left: $f"; exit 1; fi
	done
done
exit 0`}

// lease returns an idle reused container for spec's scope, or starts one.
func (b *Backend) lease(ctx context.Context, spec sandbox.Spec) (*ctr, error) {
	key := poolKey(spec)
	b.mu.Lock()
	c := b.pool[key]
	delete(b.pool, key)
	b.mu.Unlock()
	if c != nil {
		c.stopIdle()
		if c.deadReason() == "" {
			return c, nil
		}
		b.remove(ctx, c)
	}
	c, err := b.startContainer(ctx, spec, sandbox.NewID(), spec.Scope)
	if err != nil {
		return nil, err
	}
	c.key = key
	return c, nil
}

// release wipes a reused container and keeps it for the next sandbox of its
// scope, with an idle timer; a container that cannot be wiped, or that is
// not needed because the scope already has an idle one, is removed.
func (b *Backend) release(ctx context.Context, c *ctr) error {
	if c.deadReason() == "" {
		code, out, err := b.quickExec(context.WithoutCancel(ctx), c, wipe, nil)
		if err != nil || code != 0 {
			c.kill("removed: wiping it between sandboxes failed: " + out)
		}
	}
	b.mu.Lock()
	_, full := b.pool[c.key]
	keep := c.deadReason() == "" && !full && !b.closed
	if keep {
		b.pool[c.key] = c
		c.mu.Lock()
		c.idle = time.AfterFunc(b.cfg.IdleTimeout, func() { b.reapIdle(c) })
		c.mu.Unlock()
	}
	b.mu.Unlock()
	if keep {
		return nil
	}
	return b.remove(ctx, c)
}

// reapIdle removes c if it is still idle in the pool.
func (b *Backend) reapIdle(c *ctr) {
	b.mu.Lock()
	if b.pool[c.key] != c {
		b.mu.Unlock()
		return
	}
	delete(b.pool, c.key)
	b.removing.Add(1)
	b.mu.Unlock()
	defer b.removing.Done()
	b.remove(context.Background(), c)
}
