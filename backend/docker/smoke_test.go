package docker

import (
	"slices"
	"strings"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
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
