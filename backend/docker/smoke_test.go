package docker

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// TestSmoke runs /usr/bin/env in a one-shot sandbox and checks everything
// that comes back: the exact environment (execbox's fixed variables, the
// allowlisted host ones, nothing else — no host secret, none of the
// image's ENV), the result's fields and no artifacts.
func TestSmoke(t *testing.T) {
	b := newBackend(t, Config{})
	for k, v := range map[string]string{"LANG": "C.UTF-8", "LC_ALL": "C", "LC_CTYPE": "C", "TZ": "UTC", "TERM": "dumb",
		"EXECBOX_SMOKE_SECRET": "hunter2", "DOCKER_HOST": "unix:///nope.sock"} {
		t.Setenv(k, v)
	}
	res := testutil.Run(t, b, sandbox.Spec{}, "/usr/bin/env")
	got := strings.Split(strings.TrimSuffix(res.Stdout, "\n"), "\n")
	slices.Sort(got)
	want := []string{"HOME=/work", "LANG=C.UTF-8", "LC_ALL=C", "LC_CTYPE=C", "PATH=/usr/local/bin:/usr/bin:/bin", "TERM=dumb", "TMPDIR=/tmp", "TZ=UTC"}
	if !slices.Equal(got, want) {
		t.Errorf("environment:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !res.Succeeded() || res.Stderr != "" || res.Backend != Name || res.Isolation != sandbox.IsolationProcess ||
		res.ID == "" || res.Usage.Wall <= 0 || res.Usage.CPU <= 0 || res.Usage.PeakMemory <= 0 ||
		len(res.Artifacts)+len(res.Skipped) != 0 || res.StdoutTruncated || res.StderrTruncated || res.Message != "" {
		t.Errorf("result: %s usage %+v artifacts %v skipped %v", describe(res), res.Usage, res.Artifacts, res.Skipped)
	}
	for _, limit := range []string{"wall", "output", "memory", "cpus", "pids", "nofile", "file_size", "cpu_time", "tmp_size", "work_size", "network"} {
		if res.Enforcement[limit] == "" {
			t.Errorf("no enforcement given for %s: %v", limit, res.Enforcement)
		}
	}
}

// TestHealthRunsTheSmokeCheck: the image execbox is configured with is
// ready only when ordinary programs work in it. An image whose ls was
// removed still runs /bin/true; its health is available, not ready, and
// the reason names the check that failed.
func TestHealthRunsTheSmokeCheck(t *testing.T) {
	b := newBackend(t, Config{})
	if h := b.Health(t.Context()); !h.Ready || !strings.Contains(h.Reason, "smoke check") {
		t.Fatalf("health of %s: %+v", b.cfg.Image, h)
	}
	ctx := t.Context()
	const ref = "execbox-test-nols:latest"
	cr, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{
		Image: b.cfg.Image, User: "0", Entrypoint: []string{}, Cmd: []string{"/bin/sh", "-c", "rm -f /bin/ls /usr/bin/ls"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.cli.ContainerRemove(context.Background(), cr.ID, client.ContainerRemoveOptions{Force: true})
	wait := b.cli.ContainerWait(ctx, cr.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := b.cli.ContainerStart(ctx, cr.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-wait.Result:
		if r.StatusCode != 0 {
			t.Fatalf("removing ls: exit %d", r.StatusCode)
		}
	case err := <-wait.Error:
		t.Fatal(err)
	}
	if _, err := b.cli.ContainerCommit(ctx, cr.ID, client.ContainerCommitOptions{Reference: ref}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true}) })

	nols := newBackend(t, Config{Image: ref})
	h := nols.Health(ctx)
	if h.Ready || !h.Available || !strings.Contains(h.Reason, "smoke check list_dir failed") {
		t.Errorf("health of an image without ls: %+v", h)
	}
	t.Logf("without ls: %s", h.Reason)
}
