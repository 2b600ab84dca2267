package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var allowLocal = []string{"EXECBOX_ALLOW_UNISOLATED=true"}

func TestLocalEnvIsAllowlisted(t *testing.T) {
	r := execbox(t, append(allowLocal, "IT_HOST_SECRET=hunter2"), "",
		"run", "--backend", "local", "--", "python3", "-c", "import os; print(sorted(os.environ))")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := "['HOME', 'LANG', 'PATH', 'TERM', 'TMPDIR']"
	// LANG, TERM, TZ, LC_* pass only when the host has them.
	for _, name := range strings.Split(strings.Trim(strings.TrimSpace(r.stdout), "[]"), ", ") {
		name = strings.Trim(name, "'")
		switch name {
		case "HOME", "TMPDIR", "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM":
		default:
			t.Fatalf("variable %s reached the program; got %s (want a subset of %s plus LC_*/TZ)", name, r.stdout, want)
		}
	}
	if strings.Contains(r.stdout, "IT_HOST_SECRET") {
		t.Fatal("host secret leaked")
	}
}

func TestLocalRefusedWithoutAllow(t *testing.T) {
	r := execbox(t, nil, "", "run", "--backend", "local", "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "allow_unisolated") || !strings.Contains(r.stderr, "no isolation") {
		t.Fatalf("exit %d, stderr %q; want 125 and a reason naming allow_unisolated", r.code, r.stderr)
	}
}

func TestLocalTimeoutKillsTree(t *testing.T) {
	marker := fmt.Sprint(time.Now().UnixNano()%90000000 + 10000000)
	script := fmt.Sprintf("sleep %s & setsid sleep %s & wait", marker, marker)
	r := execbox(t, allowLocal, "", "run", "--backend", "local", "--timeout", "1s", "--", "sh", "-c", script)
	if r.code != 124 {
		t.Fatalf("exit %d, want 124; stderr %q", r.code, r.stderr)
	}
	if r.took > 4*time.Second {
		t.Fatalf("took %v, want about a second", r.took)
	}
	if left := alive("sleep " + marker); len(left) > 0 {
		t.Fatalf("still alive after the run: %v", left)
	}
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"sh", "-c", "exit 7"}, 7},
		{[]string{"sh", "-c", "kill -9 $$"}, 137},
		{[]string{"/nonexistent/program"}, 127},
		{[]string{"/etc/passwd"}, 126},
	} {
		r := execbox(t, allowLocal, "", append([]string{"run", "--backend", "local", "--"}, tc.args...)...)
		if r.code != tc.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tc.args, r.code, tc.code, r.stderr)
		}
	}
}

func TestStdinAndJSON(t *testing.T) {
	r := execbox(t, allowLocal, "hello", "run", "--backend", "local", "--json", "--", "cat")
	if r.code != 0 || !strings.Contains(r.stdout, `"stdout": "hello"`) || !strings.Contains(r.stdout, `"backend": "local"`) {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
}

func TestConfigUnknownKeyIsAnError(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/execbox.yaml"
	writeFile(t, path, "limits:\n  memroy: 1g\n")
	r := execbox(t, nil, "", "--config", path, "config", "print")
	if r.code != 125 || !strings.Contains(r.stderr, "memroy") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	writeFile(t, path, "limits:\n  memory: 1g\n")
	r = execbox(t, []string{"EXECBOX_LIMITS_WALL=30s"}, "", "--config", path, "config", "print")
	if r.code != 0 || !strings.Contains(r.stdout, "file "+path+":2") || !strings.Contains(r.stdout, "env EXECBOX_LIMITS_WALL") {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
}
