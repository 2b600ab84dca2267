package proc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// StatFields are the fields of /proc/PID/stat after the command name,
// which may hold spaces and parentheses and so is skipped up to its last
// ')': [0] is the state, [1] the parent's PID, [19] the start time in
// clock ticks since boot. nil when the process is gone.
func StatFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// Parents maps every process in /proc to its parent's PID.
func Parents() map[int]int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := StatFields(pid); len(f) > 1 {
			if pp, err := strconv.Atoi(f[1]); err == nil {
				parent[pid] = pp
			}
		}
	}
	return parent
}
