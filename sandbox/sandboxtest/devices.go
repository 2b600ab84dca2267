package sandboxtest

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// hostNodes are the host's device nodes a program might reach.
var hostNodes = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// nodeState is what a metadata change of a node shows in.
type nodeState struct {
	mode, uid, gid uint32
	mtime, ctime   syscall.Timespec
}

func (n nodeState) String() string {
	return fmt.Sprintf("mode %o owner %d:%d mtime %d.%09d ctime %d.%09d", n.mode, n.uid, n.gid, n.mtime.Sec, n.mtime.Nsec, n.ctime.Sec, n.ctime.Nsec)
}

func hostNodeStates(t *testing.T) map[string]nodeState {
	t.Helper()
	out := map[string]nodeState{}
	for _, p := range hostNodes {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			continue // a host without /dev/tty
		}
		out[p] = nodeState{st.Mode, st.Uid, st.Gid, st.Mtim, st.Ctim}
	}
	return out
}

// testDevices: no program changes a host device node, whoever owns it.
// Runtimes chown the stdio files they are handed to their sandbox's user
// (runsc does), so the host's /dev/null is made the sandbox user's first;
// then a program tries chmod, chown and touch on its /dev nodes and on its
// own stdio (/proc/self/fd/0-2, which must not be the host's /dev/null).
// Each attempt fails or changes a node of the sandbox's own: the host's
// nodes keep their owner, mode and times.
func (s *suite) testDevices(t *testing.T) {
	s.run(t, "host_nodes_unchanged", func(t *testing.T) {
		if s.caps.Isolation == sandbox.IsolationNone {
			t.Skip("isolation none: the program uses the host's /dev itself")
		}
		testutil.RequiresRoot(t, "root")
		testutil.LockHostDevices(t)
		var orig syscall.Stat_t
		if err := syscall.Stat("/dev/null", &orig); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := os.Chown("/dev/null", int(orig.Uid), int(orig.Gid)); err != nil {
				t.Errorf("giving the host's /dev/null back: %v", err)
			}
			if err := os.Chmod("/dev/null", os.FileMode(orig.Mode&0o777)); err != nil {
				t.Errorf("giving the host's /dev/null its mode back: %v", err)
			}
		}()
		var script strings.Builder
		for _, p := range append(hostNodes, "/proc/self/fd/0", "/proc/self/fd/1", "/proc/self/fd/2") {
			// The mode and owner asked for are the ones the host's nodes
			// have now: a change that got through shows in their ctime,
			// and breaks nothing on the host.
			fmt.Fprintf(&script, "chmod 0666 %[1]s; chown 65534:65534 %[1]s; touch -c %[1]s; ", p)
		}
		script.WriteString("exit 0")
		// A runtime on this host that starts another sandbox meanwhile
		// (a backend's warm Pod under runsc) may chown the host's
		// /dev/null itself, to its own user: a node changed to an owner
		// other than the one the program asks for was changed outside the
		// sandbox, and the check is made again (three tries). A change the
		// program could have made fails at once.
		for try := 1; ; try++ {
			if err := os.Chown("/dev/null", 65534, 65534); err != nil {
				t.Fatalf("making the host's /dev/null the sandbox user's: %v", err)
			}
			before := hostNodeStates(t)
			sb := s.create(t, s.spec(nil))
			res := s.exec(t, sb, sh(script.String()))
			after := hostNodeStates(t)
			var changed []string
			foreign := true
			for p, b := range before {
				if a := after[p]; a != b {
					changed = append(changed, fmt.Sprintf("the host's %s was changed from inside the sandbox: before %v, after %v\n(the program's output: %s)", p, b, a, clip(res.Stdout+res.Stderr)))
					foreign = foreign && (a.uid != 65534 || a.gid != 65534)
				}
			}
			if len(changed) == 0 {
				return
			}
			if !foreign || try == 3 {
				t.Error(strings.Join(changed, "\n"))
				return
			}
			t.Logf("try %d: a host node changed to an owner the program never asks for (another runtime's doing); again:\n%s", try, strings.Join(changed, "\n"))
		}
	})
}
