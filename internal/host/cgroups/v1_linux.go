package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// createV1 makes the leaf in every hierarchy and writes the limits.
func (c *Cgroup) createV1(l Limits) error {
	for _, d := range c.dirs {
		parent := filepath.Dir(d)
		err := mkdirLeaf(d, func() error {
			if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("creating cgroup parent: %w", err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if l.Memory > 0 {
		mem := c.dir("memory")
		v := strconv.FormatInt(l.Memory, 10)
		// The memory limit first: memsw may never be below it.
		if err := writeFile(filepath.Join(mem, "memory.limit_in_bytes"), v); err != nil {
			return err
		}
		if sw := filepath.Join(mem, "memory.memsw.limit_in_bytes"); fileExists(sw) {
			if err := writeFile(sw, v); err != nil {
				return err
			}
		}
	}
	if l.Pids > 0 {
		if err := writeFile(filepath.Join(c.dir("pids"), "pids.max"), strconv.Itoa(l.Pids)); err != nil {
			return err
		}
	}
	if l.ProgramPids > 0 {
		// v1 hierarchies are independent: the leaf is in the pids one only;
		// a thread may sit in a cgroup of its own there.
		c.leaf = filepath.Join(c.dir("pids"), ProgramLeaf)
		if err := os.Mkdir(c.leaf, 0o755); err != nil {
			return fmt.Errorf("creating the program leaf: %w", err)
		}
		if err := writeFile(filepath.Join(c.leaf, "pids.max"), strconv.Itoa(l.ProgramPids)); err != nil {
			return err
		}
	}
	if l.CPUs > 0 {
		cpu := c.dir("cpu")
		if err := writeFile(filepath.Join(cpu, "cpu.cfs_period_us"), strconv.Itoa(cfsPeriod)); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(cpu, "cpu.cfs_quota_us"), strconv.FormatInt(cpuQuota(l.CPUs), 10)); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cgroup) statsV1(st *Stats) error {
	usage, err := readInt(filepath.Join(c.dir("cpuacct"), "cpuacct.usage"))
	if err != nil {
		return err
	}
	st.CPU = time.Duration(usage)
	mem := c.dir("memory")
	if st.PeakMemory, err = readInt(filepath.Join(mem, "memory.max_usage_in_bytes")); err != nil {
		return err
	}
	ooms, err := readKeyed(filepath.Join(mem, "memory.oom_control"), "oom_kill")
	if err != nil {
		return err
	}
	st.OOMKills = int(ooms)
	st.PidsLimitHits, err = c.pidsHits(c.dir("pids"))
	return err
}

// pidsHits sums "max" of pids.events in d and the program leaf: a fork the
// leaf's limit refused counts there (v1 counts locally).
func (c *Cgroup) pidsHits(d string) (int, error) {
	total := 0
	for _, dir := range []string{d, c.leaf} {
		if dir == "" {
			continue
		}
		n, err := readKeyed(filepath.Join(dir, "pids.events"), "max")
		if err != nil {
			return 0, err
		}
		total += int(n)
	}
	return total, nil
}

// killV1 freezes the cgroup so nothing can fork, SIGKILLs every process,
// thaws so the signals are delivered, and repeats until it is empty.
func (c *Cgroup) killV1() error {
	state := filepath.Join(c.dir("freezer"), "freezer.state")
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
		// Without the freezer leaf (someone removed it) this degrades to
		// SIGKILL in a loop, which still ends once nothing forks any more.
		frozen := true
		if err := writeFile(state, "FROZEN"); errors.Is(err, os.ErrNotExist) {
			frozen = false
		} else if err != nil {
			return err
		}
		if frozen {
			// A task stuck in FREEZING (e.g. in an uninterruptible wait) is
			// killed anyway; the loop comes back for whatever it forks.
			waitFrozen(state, freezeTimeout)
		}
		kerr := c.signalAll()
		if frozen {
			if err := writeFile(state, "THAWED"); err != nil && !errors.Is(err, os.ErrNotExist) {
				return errors.Join(kerr, err)
			}
		}
		if kerr != nil {
			return kerr
		}
		if _, err := c.waitEmpty(100 * time.Millisecond); err != nil {
			return err
		}
	}
}

// waitFrozen polls freezer.state until it reads FROZEN or d passes.
func waitFrozen(state string, d time.Duration) {
	deadline := time.Now().Add(d)
	for wait := 100 * time.Microsecond; time.Now().Before(deadline); wait = min(2*wait, 10*time.Millisecond) {
		data, err := os.ReadFile(state)
		if err != nil || strings.TrimSpace(string(data)) == "FROZEN" {
			return
		}
		time.Sleep(wait)
	}
}
