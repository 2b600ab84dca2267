package sandboxtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Host-side views of /proc. They work where /proc is Linux's; elsewhere they
// return an error and the checks that need them say so.

// hostProc is one process seen in the host's /proc.
type hostProc struct {
	pid  int
	argv []string
}

func (p hostProc) String() string {
	return strconv.Itoa(p.pid) + " " + strings.Join(p.argv, " ")
}

// procsWith lists host processes (other than this one) whose command line
// contains s in any argument.
func procsWith(s string) ([]hostProc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []hostProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue // gone, or a kernel thread
		}
		out = append(out, hostProc{pid, strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")})
	}
	return out, nil
}

// childrenOf lists the pids whose parent is ppid, zombies included.
func childrenOf(ppid int) (map[int]string, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may contain spaces and parentheses.
		st := string(b)
		i := strings.LastIndexByte(st, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(st[i+1:])
		if len(f) < 2 {
			continue
		}
		if p, _ := strconv.Atoi(f[1]); p == ppid {
			out[pid] = st[:i+1] + " " + f[0]
		}
	}
	return out, nil
}

// openFDs counts this process's open file descriptors.
func openFDs() (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	return len(ents) - 1, nil // minus the one ReadDir itself held open
}

// fdList describes this process's open fds, for failure messages.
func fdList() string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var b strings.Builder
	for _, e := range ents {
		l, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		b.WriteString(e.Name() + " -> " + l + "\n")
	}
	return b.String()
}
