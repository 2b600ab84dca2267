package testutil

import (
	"fmt"
	"os"
	"syscall"
	"testing"
)

// devicesLock is the file whose flock the tests that change or check the
// host's device nodes take in turn, across test processes (go test runs
// packages side by side).
const devicesLock = "/run/execbox-test-devices.lock"

// LockHostDevices holds the host's device nodes for t until it ends: a
// test that chowns the host's /dev/null on purpose, or checks it, does not
// overlap another doing the same in another test process.
func LockHostDevices(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(devicesLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("opening %s: %v", devicesLock, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("locking %s: %v", devicesLock, err)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}

// RunKeepingDevNull runs m's tests and fails the run when the host's
// /dev/null is not a character device 1:3, root's, 0666 after them, or was
// not before them: runtimes (runsc) chown the stdio files they are handed
// to their sandbox's user, so a backend that hands one the host's
// /dev/null (a nil stream of os/exec, an exec without stdin) gives it
// away. It is for the test packages of backends that start such a runtime
// (runsc itself, as Docker's runtime or a cluster's RuntimeClass) or QEMU;
// as non-root it only runs the tests.
func RunKeepingDevNull(m *testing.M) int {
	if os.Geteuid() != 0 {
		return m.Run()
	}
	if err := lockedDevNullIntact(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: before this package's tests: %v\n", err)
		m.Run()
		return 1
	}
	code := m.Run()
	if err := lockedDevNullIntact(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: after this package's tests (its runs, sessions and health probes): %v\n", err)
		return 1
	}
	return code
}

// lockedDevNullIntact is devNullIntact under the devices lock.
func lockedDevNullIntact() error {
	f, err := os.OpenFile(devicesLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	return devNullIntact()
}

func devNullIntact() error {
	var st syscall.Stat_t
	if err := syscall.Stat("/dev/null", &st); err != nil {
		return fmt.Errorf("the host's /dev/null: %v", err)
	}
	if st.Mode != syscall.S_IFCHR|0o666 || st.Rdev != 0x103 || st.Uid != 0 || st.Gid != 0 {
		return fmt.Errorf("the host's /dev/null is mode %o, device %#x, owner %d:%d, want a character device 1:3, root:root 0666 "+
			"(a runtime was handed it as a stdio file and chowned it?)", st.Mode, st.Rdev, st.Uid, st.Gid)
	}
	return nil
}
