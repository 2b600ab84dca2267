package owner

import (
	"os"
	"strconv"
	"strings"

	"github.com/execbox/execbox/internal/host/proc"
)

// Owner identifies the execbox process that made something (a container,
// a Pod), precisely enough that a later execbox on the same machine can
// tell whether that process is still alive: host name, boot, PID
// namespace, PID and the PID's start time (so a reused PID is not mistaken
// for the owner).
type Owner struct {
	Host, Boot, PIDNS string
	PID               int
	Start             string
}

// Self is this process as an owner. Fields that cannot be read stay empty,
// and an owner with an empty boot is never judged dead by liveness.
func Self() Owner {
	o := Owner{PID: os.Getpid()}
	o.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		o.Boot = strings.TrimSpace(string(b))
	}
	o.PIDNS, _ = os.Readlink("/proc/self/ns/pid")
	o.Start = startTime(o.PID)
	return o
}

// String is the owner as one value (a label, an annotation); Parse reads
// it back.
func (o Owner) String() string {
	return strings.Join([]string{o.Host, o.Boot, o.PIDNS, strconv.Itoa(o.PID), o.Start}, "|")
}

// Parse reads what String wrote.
func Parse(s string) (Owner, bool) {
	f := strings.Split(s, "|")
	if len(f) != 5 {
		return Owner{}, false
	}
	pid, err := strconv.Atoi(f[3])
	if err != nil {
		return Owner{}, false
	}
	return Owner{Host: f[0], Boot: f[1], PIDNS: f[2], PID: pid, Start: f[4]}, true
}

// Dead reports whether o is certainly not running any more: it lived on
// this machine, in this boot and PID namespace, and its PID is gone or now
// belongs to a process started at another time. An owner elsewhere is
// never judged dead (only an expiry can retire what it made).
func (o Owner) Dead(me Owner) bool {
	if me.Boot == "" || o.Host != me.Host || o.Boot != me.Boot || o.PIDNS != me.PIDNS {
		return false
	}
	return startTime(o.PID) != o.Start
}

// startTime is field 22 of /proc/<pid>/stat (clock ticks since boot), or ""
// when the process does not exist.
func startTime(pid int) string {
	if f := proc.StatFields(pid); len(f) >= 20 {
		return f[19]
	}
	return ""
}
