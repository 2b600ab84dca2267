package native

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/execbox/execbox/internal/host/seccomp"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/internal/testutil/rootimage"
	"github.com/execbox/execbox/sandbox"
)

// BenchmarkStart times start-to-exit of a program, side by side in one
// run, the variants interleaved in a rotating order so that load from
// elsewhere hits them alike:
//
//	bare         fork/exec/wait from Go, no isolation
//	native       one-shot sandbox.Run (Create, Exec, Artifacts, Close) with
//	             the standalone cmd/execbox-init
//	native-exec  one Exec in a live sandbox, execbox-init
//	native-image the native one-shot with an unpacked image as the root
//	             (rootimage.Host: the host's python image) instead of the
//	             host's view
//	reexec       sandbox.Run with the init re-executing this binary
//	reexec-exec  one Exec in a live sandbox, re-exec
//	bwrap        bubblewrap with equivalent flags (every namespace, the same
//	             read-only root, /proc, /dev, 16 MiB noexec /tmp, /work,
//	             uid 65534, no capabilities, the same seccomp filter; no cgroup)
//
// Each variant reports its median and 90th percentile in milliseconds:
//
//	go test -run '^$' -bench Start -benchtime 300x ./backend/native/
func BenchmarkStart(b *testing.B) {
	for _, prog := range []struct {
		name string
		args []string
	}{
		{"true", []string{"/bin/true"}},
		{"python", []string{"/usr/bin/python3", "-I", "-S", "-c", "pass"}},
	} {
		b.Run(prog.name, func(b *testing.B) {
			benchStart(b, prog.args)
		})
	}
}

func benchStart(b *testing.B, args []string) {
	reexec := newBackend(b)
	standalone := withInit(b, buildInit(b))
	p := &sandbox.Process{Args: args}
	oneShot := func(nb *Backend) func() error {
		return func() error { return testutil.Check(sandbox.Run(context.Background(), nb, sandbox.Spec{}, p)) }
	}
	image := sandbox.Spec{Root: &sandbox.RootImage{Ref: "host-python", Dir: rootimage.Host(b)}}
	inSandbox := func(nb *Backend) func() error {
		sb := testutil.Create(b, nb, sandbox.Spec{})
		return func() error { return testutil.Check(sb.Exec(context.Background(), p)) }
	}
	variants := []testutil.Variant{
		{Name: "bare", Run: func() error {
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			return cmd.Run()
		}},
		{Name: "native", Run: oneShot(standalone)},
		{Name: "native-exec", Run: inSandbox(standalone)},
		{Name: "native-image", Run: func() error { return testutil.Check(sandbox.Run(context.Background(), standalone, image, p)) }},
		{Name: "reexec", Run: oneShot(reexec)},
		{Name: "reexec-exec", Run: inSandbox(reexec)},
	}
	if bw, err := exec.LookPath("bwrap"); err == nil {
		filter, err := seccomp.Bytes()
		if err != nil {
			b.Fatal(err)
		}
		work := b.TempDir()
		variants = append(variants, testutil.Variant{Name: "bwrap", Run: func() error { return runBwrap(bw, work, filter, args) }})
	} else {
		testutil.SkipOrFail(b, Name, "bwrap is not installed")
	}
	testutil.SideBySide(b, variants)
}

// runBwrap runs args under bwrap with the native backend's setup as far as
// bwrap can express it.
func runBwrap(bw, work string, filter []byte, args []string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	go func() {
		w.Write(filter)
		w.Close()
	}()
	a := []string{"--unshare-all", "--die-with-parent", "--new-session",
		"--uid", "65534", "--gid", "65534", "--hostname", "sandbox", "--cap-drop", "ALL",
		"--ro-bind", "/usr", "/usr"}
	for _, l := range []string{"/bin", "/sbin", "/lib", "/lib64"} {
		if t, err := os.Readlink(l); err == nil {
			a = append(a, "--symlink", t, l)
		}
	}
	for _, p := range expandDefault() {
		if filepath.Dir(p) == "/etc" || filepath.Dir(p) == "/etc/ssl" {
			a = append(a, "--ro-bind-try", p, p)
		}
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev",
		"--size", strconv.Itoa(16<<20), "--perms", "1777", "--tmpfs", "/tmp",
		"--bind", work, "/work", "--chdir", "/work",
		"--remount-ro", "/", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin",
		"--seccomp", "3", "--")
	cmd := exec.Command(bw, append(a, args...)...)
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{r}
	return cmd.Run()
}
