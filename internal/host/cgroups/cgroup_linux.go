package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Timeouts for Kill and Close; generous because they bound a loop that
// normally ends in milliseconds.
const (
	killTimeout   = 5 * time.Second
	freezeTimeout = time.Second
	rmdirTimeout  = 2 * time.Second
)

// Cgroup is one sandbox's cgroup: a leaf in every v1 hierarchy, or one v2
// leaf.
type Cgroup struct {
	m    *Manager
	name string
	dirs []string // v1: one per hierarchy, freezer's first; v2: one
	leaf string   // the program's pids leaf (Limits.ProgramPids); "" when none

	mu     sync.Mutex // serialises Kill and Close
	fd     int        // v2 O_PATH fd of the leaf, -1 when none
	closed bool
}

// attach makes a Cgroup for leaf name without touching the filesystem.
func (m *Manager) attach(name string) *Cgroup {
	c := &Cgroup{m: m, name: name, fd: -1}
	for _, p := range m.parents() {
		c.dirs = append(c.dirs, filepath.Join(p, name))
	}
	return c
}

// Name is the leaf's name, execbox-<pid>-<id>.
func (c *Cgroup) Name() string { return c.name }

// Dirs are the leaf directories: one per v1 hierarchy, or the v2 leaf.
func (c *Cgroup) Dirs() []string { return slices.Clone(c.dirs) }

// Path is the leaf's path from the root of its hierarchy (the same in
// every v1 hierarchy), as an OCI runtime's linux.cgroupsPath names it.
func (c *Cgroup) Path() string {
	if c.m.version == V2 {
		return "/" + strings.TrimLeft(strings.TrimPrefix(c.dirs[0], c.m.v2mount), "/")
	}
	return "/" + parentName + "/" + c.name
}

// dir is the leaf directory that carries controller.
func (c *Cgroup) dir(controller string) string {
	if c.m.version == V2 {
		return c.dirs[0]
	}
	return c.m.v1Dir(controller, c.name)
}

// FD returns an O_PATH directory fd of the v2 leaf, for clone3's
// CLONE_INTO_CGROUP (SysProcAttr{UseCgroupFD: true, CgroupFD: fd}). The
// Cgroup owns it; it stays valid until Close. ok is false on v1.
func (c *Cgroup) FD() (fd int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 || c.closed {
		return -1, false
	}
	return c.fd, true
}

// Add moves process pid (all its threads) into the leaf of every
// hierarchy (v1) or into the v2 leaf.
func (c *Cgroup) Add(pid int) error {
	if pid <= 1 {
		// 0 would move the caller, 1 the host's init: never a sandbox's.
		return fmt.Errorf("adding process %d to cgroup %s: not a sandbox's process", pid, c.name)
	}
	s := strconv.Itoa(pid)
	for _, d := range c.dirs {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), s); err != nil {
			return fmt.Errorf("adding process %d to cgroup %s: %w", pid, c.name, err)
		}
	}
	return nil
}

// AddProgramThread moves thread tid (a host thread id) into the program's
// pids leaf (Limits.ProgramPids): what that thread forks from then on is
// born in the leaf. On v1 the thread alone moves (the pids hierarchy's
// tasks file); on v2 the leaf is a threaded cgroup of the sandbox's
// (cgroup.threads). The thread's process must already be in the cgroup.
func (c *Cgroup) AddProgramThread(tid int) error {
	if c.leaf == "" {
		return fmt.Errorf("adding thread %d to cgroup %s: the cgroup has no program leaf", tid, c.name)
	}
	if tid <= 1 {
		return fmt.Errorf("adding thread %d to cgroup %s: not a sandbox's thread", tid, c.name)
	}
	file := "tasks"
	if c.m.version == V2 {
		file = "cgroup.threads"
	}
	if err := writeFile(filepath.Join(c.leaf, file), strconv.Itoa(tid)); err != nil {
		return fmt.Errorf("adding thread %d to the program leaf of cgroup %s: %w", tid, c.name, err)
	}
	return nil
}

// ProgramLeafDir is the program's pids leaf directory, "" when the cgroup
// has none.
func (c *Cgroup) ProgramLeafDir() string { return c.leaf }

// Stats reads what the cgroup's processes used so far. Counters the
// kernel lacks read as zero.
func (c *Cgroup) Stats() (Stats, error) {
	if _, err := os.Stat(c.dirs[0]); err != nil {
		return Stats{}, fmt.Errorf("reading stats of cgroup %s: %w", c.name, err)
	}
	var st Stats
	var err error
	if c.m.version == V2 {
		err = c.statsV2(&st)
	} else {
		err = c.statsV1(&st)
	}
	if err != nil {
		return Stats{}, fmt.Errorf("reading stats of cgroup %s: %w", c.name, err)
	}
	return st, nil
}

// Kill kills every process in the cgroup, also ones forked while it runs,
// and returns when none is left.
func (c *Cgroup) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kill()
}

func (c *Cgroup) kill() error {
	var err error
	if c.m.version == V2 {
		err = c.killV2()
	} else {
		err = c.killV1()
	}
	if err != nil {
		return fmt.Errorf("killing cgroup %s: %w", c.name, err)
	}
	return nil
}

// Close kills what is left, removes every leaf directory and closes the
// fd. Calling it again after success does nothing.
func (c *Cgroup) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	err := c.kill()
	if c.fd >= 0 {
		_ = unix.Close(c.fd)
		c.fd = -1
	}
	if rerr := c.remove(); rerr != nil {
		return errors.Join(err, rerr)
	}
	c.closed = true
	setLive(c.name, false)
	return err
}

// remove deletes the leaf directories (their subdirectories, the
// program's leaf, first), retrying while the kernel still counts exiting
// processes in them.
func (c *Cgroup) remove() error {
	var errs []error
	var dirs []string
	for _, d := range c.dirs {
		dirs = append(dirs, subdirs(d)...)
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		deadline := time.Now().Add(rmdirTimeout)
		for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
			err := unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
				break
			}
			time.Sleep(wait)
		}
	}
	return errors.Join(errs...)
}

// subdirs lists the directories below cgroup directory d (a program
// leaf), deepest first.
func subdirs(d string) []string {
	ents, err := os.ReadDir(d)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			sub := filepath.Join(d, e.Name())
			out = append(append(out, subdirs(sub)...), sub)
		}
	}
	return out
}

// Procs lists the processes in the cgroup and below it: the union over all
// leaves and their subdirectories. A leaf that is gone counts as empty.
func (c *Cgroup) Procs() ([]int, error) {
	var out []int
	var dirs []string
	for _, d := range c.dirs {
		dirs = append(append(dirs, d), subdirs(d)...)
	}
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		threads := false
		if errors.Is(err, unix.EOPNOTSUPP) {
			// A v2 threaded cgroup (the program's leaf) lists threads only.
			data, err = os.ReadFile(filepath.Join(d, "cgroup.threads"))
			threads = true
		}
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			if err == nil && threads {
				pid = tgidOf(pid)
			}
			if err == nil && pid > 0 && !slices.Contains(out, pid) {
				out = append(out, pid)
			}
		}
	}
	return out, nil
}

// tgidOf is the process of thread tid, 0 when it is gone.
func tgidOf(tid int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0
	}
	n, _ := keyedInt(strings.ReplaceAll(string(data), ":\t", " "), "Tgid")
	return int(n)
}

// waitEmpty polls until the cgroup has no process or d passes.
func (c *Cgroup) waitEmpty(d time.Duration) (left int, err error) {
	deadline := time.Now().Add(d)
	for wait := 200 * time.Microsecond; ; wait = min(2*wait, 20*time.Millisecond) {
		pids, err := c.Procs()
		if err != nil || len(pids) == 0 || time.Now().After(deadline) {
			return len(pids), err
		}
		time.Sleep(wait)
	}
}

// signalAll sends SIGKILL to every process in the cgroup.
func (c *Cgroup) signalAll() error {
	pids, err := c.Procs()
	if err != nil {
		return err
	}
	for _, p := range pids {
		if err := unix.Kill(p, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("sending SIGKILL to %d: %w", p, err)
		}
	}
	return nil
}

// readInt reads a file holding one integer; a missing file reads as 0.
func readInt(p string) (int64, error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", p, err)
	}
	return n, nil
}

// readKeyed reads "key N" from a flat-keyed file; missing file or key
// read as 0.
func readKeyed(p, key string) (int64, error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, _ := keyedInt(string(data), key)
	return n, nil
}

// Memory is the memory the cgroup's processes hold now (page cache and
// tmpfs pages they wrote included), in bytes.
func (c *Cgroup) Memory() (int64, error) {
	if c.m.version == V2 {
		return readInt(filepath.Join(c.dirs[0], "memory.current"))
	}
	return readInt(filepath.Join(c.dir("memory"), "memory.usage_in_bytes"))
}
