package testutil

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Python is the interpreter Py runs: the host's, which the local-rootfs
// backends mount.
const Python = "/usr/bin/python3"

// Run is a one-shot run in b that fails the test on an error.
func Run(t testing.TB, b sandbox.Backend, spec sandbox.Spec, args ...string) *sandbox.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sandbox.Run(ctx, b, spec, &sandbox.Process{Args: args})
	if err != nil {
		t.Fatalf("Run %q: %v", args, err)
	}
	return res
}

// Sh runs a shell script in a fresh sandbox of b.
func Sh(t testing.TB, b sandbox.Backend, spec sandbox.Spec, script string) *sandbox.Result {
	t.Helper()
	return Run(t, b, spec, "/bin/sh", "-c", script)
}

// Py runs a Python program (isolated mode) in a fresh sandbox of b.
func Py(t testing.TB, b sandbox.Backend, spec sandbox.Spec, code string) *sandbox.Result {
	t.Helper()
	return Run(t, b, spec, Python, "-I", "-c", code)
}

// Create makes a sandbox of b that is closed when the test ends; a failing
// Close fails the test.
func Create(t testing.TB, b sandbox.Backend, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	sb, err := b.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sb
}

// Exec runs args in sb. An error marks the test failed (without stopping
// it) and comes back as a sandbox-error result.
func Exec(t testing.TB, sb sandbox.Sandbox, args ...string) *sandbox.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, &sandbox.Process{Args: args})
	if err != nil {
		t.Errorf("Exec %q: %v", args, err)
		return &sandbox.Result{Reason: sandbox.ReasonSandboxError, Message: err.Error()}
	}
	return res
}

// WantOK fails the test unless res succeeded.
func WantOK(t testing.TB, res *sandbox.Result) {
	t.Helper()
	if !res.Succeeded() {
		t.Fatalf("program failed: reason=%s exit=%d signal=%s message=%q stdout=%q stderr=%q",
			res.Reason, res.ExitCode, res.Signal, res.Message, res.Stdout, res.Stderr)
	}
}

// Check turns a run's outcome into an error: err, or one for a result that
// did not succeed.
func Check(res *sandbox.Result, err error) error {
	if err != nil {
		return err
	}
	if !res.Succeeded() {
		return fmt.Errorf("program failed: %s %d %s %s", res.Reason, res.ExitCode, res.Message, res.Stderr)
	}
	return nil
}

// Listen serves reply on a fresh TCP port of the host's loopback until the
// test ends, and returns the port.
func Listen(t testing.TB, reply string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(reply))
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}
