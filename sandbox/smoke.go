package sandbox

import (
	"context"
	"fmt"
	"strings"
)

// smokeLines is how many lines the output burst of the smoke check writes.
const smokeLines = 10000

// smokeScript is the functional check every backend must pass to be
// ready: what ordinary programs need, not only that a sandbox starts. Each
// check names itself when it fails; python3's checks run where the
// sandbox has python3. It needs only a POSIX sh and coreutils.
var smokeScript = `set -u
fail() { [ -z "${2:-}" ] || printf '%s\n' "$2" >&2; echo "smoke check $1 failed" >&2; exit 1; }
out=$(ls -la /work 2>&1) || fail list_dir "$out"
out=$(stat /work 2>&1) || fail stat "$out"
echo tmp-ok >/tmp/execbox-smoke 2>/dev/null && [ "$(cat /tmp/execbox-smoke)" = tmp-ok ] || fail tmp_file
echo work-ok >execbox-smoke 2>/dev/null && [ "$(cat execbox-smoke)" = work-ok ] || fail work_file
sh -c 'exit 7'; [ $? = 7 ] || fail fork_wait
if command -v python3 >/dev/null 2>&1; then
	out=$(python3 -c '
import os, select
r, w = os.pipe()
os.write(w, b"x")
assert select.select([r], [], [], 5)[0] == [r], "select"
p = select.poll()
p.register(r, select.POLLIN)
assert p.poll(5000), "poll"
pid = os.fork()
if pid == 0:
    os._exit(3)
assert os.waitpid(pid, 0)[1] >> 8 == 3, "waitpid"
os.stat("/work"); os.listdir("/work")
' 2>&1) || fail python_select_poll "$out"
fi
i=0
while [ $i -lt ` + fmt.Sprint(smokeLines) + ` ]; do echo "line $i"; i=$((i+1)); done
`

// Smoke runs the smoke check in a one-shot sandbox of b made from spec and
// says whether it passed; when it did not, reason names the failing check
// (list_dir, stat, tmp_file, work_file, fork_wait, python_select_poll,
// output_burst) or says why it could not run. Backends call it from
// Health: a backend is ready only when it passes.
func Smoke(ctx context.Context, b Backend, spec Spec) (ok bool, reason string) {
	res, err := Run(ctx, b, spec, &Process{Args: []string{"sh", "-c", smokeScript}})
	switch {
	case err != nil:
		return false, "smoke check could not run: " + err.Error()
	case res.Reason == ReasonExited && res.ExitCode == 1 && strings.Contains(res.Stderr, "smoke check "):
		// The check's name is the last line; the line before says why.
		lines := strings.Split(strings.TrimSpace(res.Stderr), "\n")
		reason = lines[len(lines)-1]
		if len(lines) > 1 {
			reason += ": " + LastLine(strings.Join(lines[:len(lines)-1], "\n"))
		}
		return false, reason
	case !res.Succeeded():
		msg := res.Message
		if msg == "" {
			msg = LastLine(res.Stderr)
		}
		return false, fmt.Sprintf("smoke check ended %s (exit %d): %s", res.Reason, res.ExitCode, msg)
	}
	if n := strings.Count(res.Stdout, "\n"); n != smokeLines || res.StdoutTruncated ||
		!strings.HasSuffix(res.Stdout, fmt.Sprintf("line %d\n", smokeLines-1)) {
		return false, fmt.Sprintf("smoke check output_burst failed: %d of %d lines arrived", n, smokeLines)
	}
	return true, ""
}

// LastLine is the last non-empty line of s, at most 500 bytes: what a
// message quotes of a program's stderr.
func LastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

type probingKey struct{}

// Probing marks ctx as a health probe's. A sandbox made under it is the
// probe's alone: the backend boots nothing ahead to follow it (a warm VM
// or Pod), so a backend that only its probes use holds no machine
// between them.
func Probing(ctx context.Context) context.Context {
	return context.WithValue(ctx, probingKey{}, true)
}

// IsProbing says whether ctx is a health probe's (Probing).
func IsProbing(ctx context.Context) bool {
	v, _ := ctx.Value(probingKey{}).(bool)
	return v
}
