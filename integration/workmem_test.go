package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/host/cgroups"
	"github.com/execbox/execbox/sandbox"
)

// Issue 33, finding 5: a session's work dir is memory the server's writes
// take from the host (on native they are charged to the server's own
// memory cgroup). Every open session holds its work_size + tmp_size of
// sessions.max_file_memory; what does not fit is refused, so the sessions'
// files never take more than that, however many sessions may be open.

// TestServeSessionFileMemory: through a real `execbox serve` on the native
// backend, a session at the bound is created and one byte past it is 429
// sessions_exhausted naming the bound — the whole budget and a token's
// half of it alike; closing a session gives its part back; the issue's
// session (memory 32m, work_size 1g) takes a 1 GB upload, which lands in
// the server's memory cgroup, counted. A budget beyond the host's memory
// is refused before anything starts.
func TestServeSessionFileMemory(t *testing.T) {
	requireNative(t)
	host := sandbox.HostMemory()
	env := func(v int64) []string { return []string{fmt.Sprintf("EXECBOX_SESSIONS_MAX_FILE_MEMORY=%d", v)} }
	if r := execbox(t, env(host), "", "config", "print"); r.code != 0 {
		t.Fatalf("sessions.max_file_memory at the host's memory: exit %d: %s", r.code, r.stderr)
	}
	r := execbox(t, env(host+1), "", "config", "print")
	if r.code != 125 || !strings.Contains(r.stderr, "sessions.max_file_memory") || !strings.Contains(r.stderr, "beyond this host's memory") {
		t.Fatalf("sessions.max_file_memory a byte beyond the host's memory: exit %d: %s", r.code, r.stderr)
	}

	// The server in a memory cgroup of its own, to see what it is charged.
	m, err := cgroups.Open()
	if err != nil {
		t.Fatal(err)
	}
	cg, err := m.Create("filememory", cgroups.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cg.Close() })
	join := `for d in ` + strings.Join(cg.Dirs(), " ") + `; do echo $$ > "$d/cgroup.procs" || exit 1; done; exec "$@"`
	// A session at the maxima holds 1g + 32m; the budget two of 1040m, a
	// token's share (half, at least a session at the maxima) 1056m.
	const budget = 2080 * sandbox.MiB
	s, err := launchWrapped(t, []string{"sh", "-c", join, "sh"}, []string{"EXECBOX_BACKEND=native",
		"EXECBOX_TOKEN=admin-secret", "EXECBOX_AUTH_TOKENS=alice:" + auth.HashSecret("alice-secret"),
		"EXECBOX_MAX_LIMITS_WORK_SIZE=1g", "EXECBOX_MAX_LIMITS_TMP_SIZE=32m",
		fmt.Sprintf("EXECBOX_SESSIONS_MAX_FILE_MEMORY=%d", budget)})
	if err != nil {
		t.Fatal(err)
	}
	charged := func(what string) int64 {
		t.Helper()
		n, err := cg.Memory()
		if err != nil {
			t.Fatal(err)
		}
		hwm, _ := memStatus(t, s.cmd.Process.Pid)
		t.Logf("%s: the server's memory cgroup holds %d MiB, its VmHWM is %d MiB", what, n>>20, hwm>>20)
		return n
	}
	create := func(token string, work, tmp int64, want int, says string) string {
		t.Helper()
		body := fmt.Sprintf(`{"backend":"native","limits":{"memory":"32m","work_size":%d,"tmp_size":%d}}`, work, tmp)
		st, _, out := s.raw("POST", "/v1/sessions", body, "Authorization", "Bearer "+token)
		if st != want || !strings.Contains(out, says) {
			t.Fatalf("a session of work_size %d and tmp_size %d for %s: %d %s; want %d saying %q", work, tmp, token, st, out, want, says)
		}
		var sess struct{ ID string }
		json.Unmarshal([]byte(out), &sess)
		return sess.ID
	}
	const mib = sandbox.MiB
	charged("started")

	// alice's share, 1056m: 1040m, then 16m at the bound, a byte past it.
	repro := create("alice-secret", 1024*mib, 16*mib, 201, `"id"`)
	create("alice-secret", 15*mib+1, mib, 429, "half of sessions.max_file_memory")
	create("alice-secret", 15*mib, mib, 201, `"id"`)
	// The whole budget: the 1024m left, and a byte past it.
	create("admin-secret", 1008*mib+1, 16*mib, 429, "(sessions.max_file_memory)")
	create("admin-secret", 1008*mib, 16*mib, 201, `"id"`)
	create("admin-secret", 1, 1, 429, "sessions_exhausted")

	// The upload: 1 GB into the session of memory 32m and
	// work_size 1g. Its pages are the server's, and were held for it.
	c := s.client("alice-secret")
	const gb = 1_000_000_000
	if fi, err := c.PutFile(context.Background(), repro, "big.bin", io.LimitReader(zeros{}, gb)); err != nil || fi.Size != gb {
		t.Fatalf("uploading 1 GB: %+v, %v", fi, err)
	}
	full := charged("1 GB uploaded into a session of memory 32m, work_size 1g")

	// Closing it gives its 1040m back, and the host its memory: alice may
	// open as large a session again, and no larger.
	if err := c.CloseSession(context.Background(), repro); err != nil {
		t.Fatal(err)
	}
	// Its pages go with the last mount of its tmpfs: a mount namespace
	// made meanwhile (a pooled sandbox being set up) holds a copy for a
	// moment (seen: up to 160 ms).
	closed := time.Now()
	for after := charged("that session closed"); after > full-900*mib; after = charged("waiting") {
		if time.Since(closed) > 10*time.Second {
			t.Fatalf("10 s after the session closed, %d MiB of its 1 GB of files are freed from the server's memory cgroup", (full-after)>>20)
		}
		time.Sleep(20 * time.Millisecond)
	}
	create("alice-secret", 1024*mib, 16*mib+1, 429, "(sessions.max_file_memory)")
	create("alice-secret", 1024*mib, 16*mib, 201, `"id"`)
}
