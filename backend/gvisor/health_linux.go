package gvisor

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// smokeScript checks, inside a sandbox, what ordinary programs need and a
// runsc release may lack: statx as coreutils 9 calls it (`ls -la`, `stat`;
// runsc 2022 fails it with EINVAL), select(2) through the policy (runsc
// 2022 named it otherwise and the policy denied it), and a burst of small
// writes reaching the host whole. Each failed check prints "<check>:
// <what happened>" on stderr; stdout is the burst, the numbers 1 to
// smokeLines, one write each.
var smokeScript = strings.ReplaceAll(smokeTemplate, "SMOKE_LINES", strconv.Itoa(smokeLines))

const smokeTemplate = `
failed=0
fail() { printf '%s: %s\n' "$1" "$2" | head -c 300 >&2; echo >&2; failed=1; }
out=$(ls -la / 2>&1 >/dev/null) || fail statx "ls -la /: $out"
out=$(stat / 2>&1 >/dev/null) || fail statx "stat /: $out"
if command -v python3 >/dev/null; then
	out=$(python3 -I -S -c 'import os, select; r, w = os.pipe(); os.write(w, b"x"); assert select.select([r], [], [], 5)[0] == [r]' 2>&1) || fail select "python3 select.select: $out"
elif command -v perl >/dev/null; then
	out=$(perl -e 'pipe(R, W) or die; syswrite(W, "x"); vec($r, fileno(R), 1) = 1; select($r, undef, undef, 5) == 1 or die "select: $!"' 2>&1) || fail select "perl select: $out"
fi
i=0
while [ "$i" -lt SMOKE_LINES ]; do i=$((i + 1)); echo "$i"; done
exit $failed
`

// smokeLines is how many lines the burst writes.
const smokeLines = 5000

// smoke is the last smoke run's verdict, for the hostbase Health answer
// of a given CheckedAt.
type smoke struct {
	mu     sync.Mutex
	at     time.Time
	failed string // "" when every check passed
}

// Health is hostbase's answer (a sandbox started /bin/true), and then the
// smoke checks: a backend whose sandboxes start but whose programs fail
// at ordinary things is available (a named run works) but not ready (auto
// does not pick it), and the reason names the check that failed.
func (b *Backend) Health(ctx context.Context) sandbox.Health {
	h := b.Backend.Health(ctx)
	if !h.Available || !h.Ready {
		return h
	}
	b.smoke.mu.Lock()
	defer b.smoke.mu.Unlock()
	if !b.smoke.at.Equal(h.CheckedAt) {
		failed := b.runSmoke(ctx)
		if ctx.Err() != nil {
			h.Ready, h.Reason = false, "smoke checks not run: "+ctx.Err().Error()
			return h
		}
		b.smoke.at, b.smoke.failed = h.CheckedAt, failed
	}
	if b.smoke.failed != "" {
		h.Ready = false
		h.Reason = "not ready: " + b.smoke.failed + "; " + h.Reason
	}
	return h
}

// runSmoke runs smokeScript in a one-shot sandbox and says what failed.
func (b *Backend) runSmoke(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := sandbox.Run(ctx, b, sandbox.Spec{Limits: sandbox.Limits{Wall: 20 * time.Second}},
		&sandbox.Process{Args: []string{"/bin/sh", "-c", smokeScript}})
	if err != nil {
		return "smoke checks failed to run: " + err.Error()
	}
	var failed []string
	for line := range strings.Lines(res.Stderr) {
		if line = strings.TrimSpace(line); line != "" {
			failed = append(failed, line)
		}
	}
	if res.Reason != sandbox.ReasonExited || (res.ExitCode != 0 && len(failed) == 0) {
		failed = append(failed, fmt.Sprintf("smoke run ended %s (exit %d): %s", res.Reason, res.ExitCode, res.Message))
	}
	var want strings.Builder
	for i := 1; i <= smokeLines; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	if res.Stdout != want.String() {
		failed = append(failed, fmt.Sprintf("output burst: %d of %d bytes of %d lines arrived intact", commonPrefix(res.Stdout, want.String()), want.Len(), smokeLines))
	}
	if len(failed) == 0 {
		return ""
	}
	msg := "check " + strings.Join(failed, "; ")
	if strings.HasPrefix(failed[0], "statx:") {
		msg += fmt.Sprintf(" (runsc %s lacks statx with AT_NO_AUTOMOUNT, which coreutils 9's ls and stat use; a current runsc has it)", b.Host().Own.runsc.version)
	}
	return msg
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
