package local

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

func runAsBackend(t *testing.T, root string) sandbox.Backend {
	t.Helper()
	b, err := New(sandbox.Settings{WorkRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A root-owned, 0711 work root, as an operator would make it.
func workRootFor(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(root, 0o711); err != nil {
		t.Fatal(err)
	}
	// t.TempDir's parents are 0700: let nobody traverse them.
	for d := filepath.Dir(root); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o711)
	}
	return root
}

func TestRunAsUserRuns(t *testing.T) {
	testutil.RequiresRoot(t, "root")
	root := workRootFor(t)
	spec := sandbox.Spec{Policy: sandbox.Policy{RunAsUser: "nobody"}, Files: map[string][]byte{"in.txt": []byte("x")}}
	res, err := sandbox.Run(context.Background(), runAsBackend(t, root), spec,
		&sandbox.Process{Args: []string{"sh", "-c", "id -u; id -g; echo $USER; cat in.txt; echo out > out.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "65534\n65534\nnobody\nx" || len(res.Artifacts) != 1 {
		t.Fatalf("result %+v", res)
	}
}

func TestRunAsUserRefusals(t *testing.T) {
	testutil.RequiresRoot(t, "root")
	good := workRootFor(t)
	worldWritable := workRootFor(t)
	os.Chmod(worldWritable, 0o777)
	for _, tc := range []struct {
		name, user, root, code string
	}{
		{"missing user", "execbox-no-such-user", good, "run_as_user_missing"},
		{"root user", "root", good, "run_as_user_root"},
		{"missing work root", "nobody", filepath.Join(good, "absent"), "work_root_missing"},
		{"world-writable work root", "nobody", worldWritable, "work_root_world_writable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runAsBackend(t, tc.root).Create(context.Background(), sandbox.Spec{Policy: sandbox.Policy{RunAsUser: tc.user}})
			if !errors.Is(err, sandbox.ErrDenied) || sandbox.CodeOf(err) != tc.code {
				t.Fatalf("Create = %v (code %s), want denied %s", err, sandbox.CodeOf(err), tc.code)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(good, "absent")); !os.IsNotExist(err) {
		t.Fatal("a refused Create made the missing work root")
	}
}

// The refusal for a non-root execbox: the test binary runs this test again
// as nobody.
func TestRunAsUserNeedsRootExecbox(t *testing.T) {
	if os.Getenv(childEnv) == t.Name() {
		_, err := runAsBackend(t, os.Getenv("EXECBOX_LOCAL_RUNAS_ROOT")).Create(context.Background(), sandbox.Spec{Policy: sandbox.Policy{RunAsUser: "nobody"}})
		if !errors.Is(err, sandbox.ErrDenied) || sandbox.CodeOf(err) != "run_as_user_not_root" {
			t.Fatalf("as non-root: %v", err)
		}
		return
	}
	testutil.RequiresRoot(t, "root")
	dir := workRootFor(t)
	asNobody(t, dir, "EXECBOX_LOCAL_RUNAS_ROOT="+dir)
}

// childEnv names the test a copy of the test binary runs as nobody.
const childEnv = "EXECBOX_LOCAL_CHILD"

// asNobody runs the calling test again as nobody, in a copy of the test
// binary in dir (which nobody must reach), with env added, and fails
// unless it passed.
func asNobody(t *testing.T, dir string, env ...string) {
	t.Helper()
	bin := filepath.Join(dir, "local.test")
	data, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append([]string{childEnv + "=" + t.Name(), "PATH=/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child as nobody: %v\n%s", err, out)
	}
	t.Logf("child as nobody:\n%s", out)
}
