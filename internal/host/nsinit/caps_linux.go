package nsinit

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dropCapabilities empties the bounding, ambient and inheritable sets of
// the calling thread (the one that forks the program). Effective and
// permitted stay for the fork's setgroups/setgid/setuid, which clears them
// in the child: a uid change away from 0 drops them, and execve by a
// non-root uid with empty inheritable, ambient and bounding sets (and
// no_new_privs ignoring file capabilities) leaves nothing.
func dropCapabilities() error {
	for c := 0; c <= 63; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			break // past the kernel's last capability
		}
		if err != nil {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("reading capabilities: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clearing inheritable capabilities: %w", err)
	}
	return nil
}

// installSeccomp sets no_new_privs and loads filter (a raw struct
// sock_filter array) on the calling thread only: the program is forked
// from this thread and inherits it; the init's other threads have no use
// for it.
func installSeccomp(filter []byte) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	if len(filter) == 0 {
		return nil
	}
	if len(filter)%8 != 0 || len(filter)/8 > 4096 {
		return fmt.Errorf("seccomp filter of %d bytes is not a valid program", len(filter))
	}
	prog := unix.SockFprog{Len: uint16(len(filter) / 8), Filter: (*unix.SockFilter)(unsafe.Pointer(&filter[0]))}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("installing seccomp filter: %w", errno)
	}
	return nil
}
