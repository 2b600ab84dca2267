// Command execbox-guest is execbox's agent inside a machine of a sandbox's
// own, where it makes the sandbox and serves the host's calls:
//
//   - the init of an execbox microVM (PID 1 of the VM, no arguments): the
//     microvm backend puts it in the VM's initramfs as /init; it makes the
//     sandbox inside the VM with the native backend;
//   - `execbox-guest pod`: the process of the kubernetes backend's sandbox
//     Pod, spoken to through its stdin and stdout; the Pod is the
//     isolation, and the sandbox inside it is the local backend's (the
//     work root is /work) under execbox's seccomp filter;
//   - `execbox-guest install DIR`: copies itself into DIR, for the Pod's
//     init container, so that any image can run the agent;
//   - `execbox-guest dial HOST:PORT`: exits 0 when a TCP connection to it
//     succeeds within 3 s (the kubernetes backend's egress probe).
//
// Build it static:
//
//	CGO_ENABLED=0 go build -o execbox-guest ./cmd/execbox-guest
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/execbox/execbox/backend/native"
	"github.com/execbox/execbox/internal/host/guest"
	"github.com/execbox/execbox/internal/host/seccomp"
)

func main() {
	if len(os.Args) < 2 {
		guest.Main(native.New)
	}
	switch os.Args[1] {
	case "pod":
		// execbox's seccomp filter, on the agent and so on everything it
		// starts: the runtime's default profile allows ptrace and
		// io_uring, which a sandbox on any other backend is denied.
		if err := seccomp.Install(); err != nil {
			fmt.Fprintln(os.Stderr, "execbox-guest:", err)
			os.Exit(1)
		}
		if err := guest.ServeStdio(podBackend, "/work"); err != nil {
			fmt.Fprintln(os.Stderr, "execbox-guest:", err)
			os.Exit(1)
		}
		return
	case "dial":
		// The kubernetes backend's health probe: can a program of the
		// Pod reach ADDR? Exit 0 when it connected, 1 when it did not.
		if len(os.Args) != 3 {
			break
		}
		c, err := net.DialTimeout("tcp", os.Args[2], 3*time.Second)
		if err != nil {
			fmt.Println("not connected:", err)
			os.Exit(1)
		}
		c.Close()
		fmt.Println("connected")
		return
	case "install":
		if len(os.Args) != 3 {
			break
		}
		if err := install(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "execbox-guest install:", err)
			os.Exit(1)
		}
		return
	}
	fmt.Fprintln(os.Stderr, "usage: execbox-guest (as a microVM's init) | execbox-guest pod | execbox-guest install DIR | execbox-guest dial HOST:PORT")
	os.Exit(2)
}

// install copies this binary into dir as execbox-guest, executable.
func install(dir string) error {
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer self.Close()
	dst, err := os.OpenFile(filepath.Join(dir, "execbox-guest"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o555)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, self); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
