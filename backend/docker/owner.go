package docker

import (
	"os"
	"strconv"
	"strings"

	"github.com/execbox/execbox/internal/proc"
)

// owner identifies the execbox process that made a container, precisely
// enough that a later execbox on the same machine can tell whether that
// process is still alive: host name, boot, PID namespace, PID and the PID's
// start time (so a reused PID is not mistaken for the owner).
type owner struct {
	host, boot, pidns string
	pid               int
	start             string
}

// self is this process as an owner. Fields that cannot be read stay empty,
// and an owner with an empty boot is never judged dead by liveness.
func self() owner {
	o := owner{pid: os.Getpid()}
	o.host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		o.boot = strings.TrimSpace(string(b))
	}
	o.pidns, _ = os.Readlink("/proc/self/ns/pid")
	o.start = startTime(o.pid)
	return o
}

func (o owner) String() string {
	return strings.Join([]string{o.host, o.boot, o.pidns, strconv.Itoa(o.pid), o.start}, "|")
}

func parseOwner(s string) (owner, bool) {
	f := strings.Split(s, "|")
	if len(f) != 5 {
		return owner{}, false
	}
	pid, err := strconv.Atoi(f[3])
	if err != nil {
		return owner{}, false
	}
	return owner{host: f[0], boot: f[1], pidns: f[2], pid: pid, start: f[4]}, true
}

// dead reports whether o is certainly not running any more: it lived on
// this machine, in this boot and PID namespace, and its PID is gone or now
// belongs to a process started at another time. An owner elsewhere is
// never judged dead (only its containers' expiry can retire them).
func (o owner) dead(me owner) bool {
	if me.boot == "" || o.host != me.host || o.boot != me.boot || o.pidns != me.pidns {
		return false
	}
	return startTime(o.pid) != o.start
}

// startTime is field 22 of /proc/<pid>/stat (clock ticks since boot), or ""
// when the process does not exist.
func startTime(pid int) string {
	if f := proc.StatFields(pid); len(f) >= 20 {
		return f[19]
	}
	return ""
}
