package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// createV2 makes the leaf, writes the limits and opens the leaf's fd.
func (c *Cgroup) createV2(l Limits) error {
	d := c.dirs[0]
	if err := mkdirLeaf(d, c.m.ensureParentV2); err != nil {
		return err
	}
	need := func(ctrl string) error {
		if !slices.Contains(c.m.v2ctrl, ctrl) {
			return fmt.Errorf("%s limit not enforceable: controller not enabled", ctrl)
		}
		return nil
	}
	if l.Memory > 0 {
		if err := need("memory"); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(d, "memory.max"), strconv.FormatInt(l.Memory, 10)); err != nil {
			return err
		}
		// An OOM kill takes the whole sandbox, not one process of it: a
		// half-killed tree is a state no caller can reason about.
		if og := filepath.Join(d, "memory.oom.group"); fileExists(og) {
			if err := writeFile(og, "1"); err != nil {
				return err
			}
		}
		if sw := filepath.Join(d, "memory.swap.max"); fileExists(sw) {
			if err := writeFile(sw, "0"); err != nil {
				return err
			}
		}
	}
	if l.Pids > 0 {
		if err := need("pids"); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(d, "pids.max"), strconv.Itoa(l.Pids)); err != nil {
			return err
		}
	}
	if l.CPUs > 0 {
		if err := need("cpu"); err != nil {
			return err
		}
		v := strconv.FormatInt(cpuQuota(l.CPUs), 10) + " " + strconv.Itoa(cfsPeriod)
		if err := writeFile(filepath.Join(d, "cpu.max"), v); err != nil {
			return err
		}
	}
	if l.ProgramPids > 0 {
		if err := need("pids"); err != nil {
			return err
		}
		if err := c.makeLeafV2(l.ProgramPids); err != nil {
			return err
		}
	}
	fd, err := unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", d, err)
	}
	c.fd = fd
	return nil
}

// makeLeafV2 makes the program's leaf: a threaded child, so its members
// are threads and the init's forking thread can sit in it while the rest
// of the init stays in the sandbox's cgroup. Enabling only pids (a
// threaded controller) for children keeps the sandbox's cgroup able to
// hold processes itself, so CLONE_INTO_CGROUP still places the init
// there. pids 0 makes the leaf without a pids limit (tests on a hierarchy
// without the controller).
func (c *Cgroup) makeLeafV2(pids int) error {
	d := c.dirs[0]
	if pids > 0 {
		if err := writeFile(filepath.Join(d, "cgroup.subtree_control"), "+pids"); err != nil {
			return err
		}
	}
	c.leaf = filepath.Join(d, ProgramLeaf)
	if err := os.Mkdir(c.leaf, 0o755); err != nil {
		return fmt.Errorf("creating the program leaf: %w", err)
	}
	if err := writeFile(filepath.Join(c.leaf, "cgroup.type"), "threaded"); err != nil {
		return err
	}
	if pids > 0 {
		if err := writeFile(filepath.Join(c.leaf, "pids.max"), strconv.Itoa(pids)); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cgroup) statsV2(st *Stats) error {
	d := c.dirs[0]
	usec, err := readKeyed(filepath.Join(d, "cpu.stat"), "usage_usec")
	if err != nil {
		return err
	}
	st.CPU = time.Duration(usec) * time.Microsecond
	if st.PeakMemory, err = readInt(filepath.Join(d, "memory.peak")); err != nil {
		return err
	}
	ooms, err := readKeyed(filepath.Join(d, "memory.events"), "oom_kill")
	if err != nil {
		return err
	}
	st.OOMKills = int(ooms)
	st.PidsLimitHits, err = c.pidsHits(d)
	return err
}

// killV2 uses cgroup.kill, which the kernel applies to the whole subtree
// including tasks forked concurrently; without it (before Linux 5.14) it
// freezes, kills and thaws like v1.
func (c *Cgroup) killV2() error {
	d := c.dirs[0]
	killFile := filepath.Join(d, "cgroup.kill")
	useKill := fileExists(killFile)
	deadline := time.Now().Add(killTimeout)
	for {
		pids, err := c.Procs()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes left after %v", len(pids), killTimeout)
		}
		if useKill {
			if err := writeFile(killFile, "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		} else if err := c.freezeKillV2(); err != nil {
			return err
		}
		if _, err := c.waitEmpty(100 * time.Millisecond); err != nil {
			return err
		}
	}
}

// freezeKillV2 is killV1 on the v2 freezer (cgroup.freeze, cgroup.events).
func (c *Cgroup) freezeKillV2() error {
	d := c.dirs[0]
	freeze := filepath.Join(d, "cgroup.freeze")
	if err := writeFile(freeze, "1"); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return c.signalAll()
		}
		return err
	}
	deadline := time.Now().Add(freezeTimeout)
	for wait := 100 * time.Microsecond; time.Now().Before(deadline); wait = min(2*wait, 10*time.Millisecond) {
		if n, err := readKeyed(filepath.Join(d, "cgroup.events"), "frozen"); err != nil || n == 1 {
			break
		}
		time.Sleep(wait)
	}
	kerr := c.signalAll()
	if err := writeFile(freeze, "0"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return errors.Join(kerr, err)
	}
	return kerr
}
