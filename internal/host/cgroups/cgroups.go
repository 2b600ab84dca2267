package cgroups

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Versions Open can report.
const (
	V1   = "v1"
	V2   = "v2"
	None = "none"
)

// parentName is the directory all leaves live in.
const parentName = "execbox"

// leafPrefix starts every leaf name: execbox-<pid>-<id>.
const leafPrefix = "execbox-"

// Limits bound one cgroup. A zero field means no limit.
type Limits struct {
	Memory int64   // bytes, swap included: memory+swap = Memory
	Pids   int     // processes and threads, of the whole cgroup
	CPUs   float64 // CPU quota in cores
	// ProgramPids, when > 0, gives the program a pids leaf of its own below
	// the cgroup, ProgramLeaf, with this limit: the program's processes and
	// threads plus the one thread of the backend's init that forks it,
	// placed there with AddProgramThread (the program is born in the leaf
	// and cannot leave it). The init's other threads and the backend's
	// helpers stay above the leaf, held by Pids, which must then be at
	// least ProgramPids.
	ProgramPids int
}

// ProgramLeaf is the name of the program's pids leaf below a cgroup.
const ProgramLeaf = "program"

// Validate rejects negative or non-finite limits.
func (l Limits) Validate() error {
	switch {
	case l.Memory < 0:
		return sandbox.Errorf(sandbox.ErrInvalid, "limit_invalid", "cgroup memory limit must not be negative")
	case l.Pids < 0:
		return sandbox.Errorf(sandbox.ErrInvalid, "limit_invalid", "cgroup pids limit must not be negative")
	case l.CPUs < 0 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0):
		return sandbox.Errorf(sandbox.ErrInvalid, "limit_invalid", "cgroup cpu limit must be a non-negative number")
	case l.ProgramPids < 0:
		return sandbox.Errorf(sandbox.ErrInvalid, "limit_invalid", "cgroup program pids limit must not be negative")
	case l.ProgramPids > 0 && l.Pids > 0 && l.Pids < l.ProgramPids:
		return sandbox.Errorf(sandbox.ErrInvalid, "limit_invalid", "cgroup pids limit %d is below the program's %d", l.Pids, l.ProgramPids)
	}
	return nil
}

// Stats is what a cgroup's processes used.
type Stats struct {
	CPU           time.Duration // user+sys of the whole tree
	PeakMemory    int64         // bytes; 0 when the kernel does not report it
	OOMKills      int           // processes the OOM killer ended
	PidsLimitHits int           // forks and clones refused by the pids limit so far
}

// cfsPeriod is the CPU quota period in microseconds (the kernel default).
const cfsPeriod = 100000

// cpuQuota turns cores into a quota per cfsPeriod, at least the kernel's
// minimum of 1ms.
func cpuQuota(cpus float64) int64 {
	q := int64(math.Round(cpus * cfsPeriod))
	return max(q, 1000)
}

// validID accepts ids that are safe as one path element.
func validID(id string) bool {
	if id == "" || len(id) > 128 || id == "." || id == ".." {
		return false
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}

// leafName is the leaf directory's name for id made by daemon pid.
func leafName(pid int, id string) string {
	return leafPrefix + strconv.Itoa(pid) + "-" + id
}

// LeafOwner parses the PID of the daemon that made a leaf out of its name,
// execbox-<pid>-<id>. An OCI runtime given a leaf's Path names the leaves
// it makes in other hierarchies alike.
func LeafOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, leafPrefix)
	if !ok {
		return 0, false
	}
	p, id, ok := strings.Cut(rest, "-")
	if !ok || id == "" {
		return 0, false
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != p {
		return 0, false
	}
	return pid, true
}

// keyedInt finds "key N" in the lines of a flat-keyed cgroup file.
func keyedInt(data, key string) (int64, bool) {
	for line := range strings.Lines(data) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
