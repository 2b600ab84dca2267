package hostbase

import "fmt"

// Enforcement is the part of the enforcement table the backends that run
// the program on the host kernel share: output, the rlimits, the work
// dir's tmpfs, and memory, pids and cpus by cgroup or, where a controller
// is missing, by their stand-ins (Rlimits). tasks names what the pids
// limit adds for the backend's own processes ("the init's threads"),
// extra of them. The backend adds wall, tmp_size, network, seccomp and
// landlock.
func (h *Host[F]) Enforcement(extra int, tasks string) map[string]string {
	m := map[string]string{
		"output":    "execbox capture",
		"cpu_time":  "rlimit RLIMIT_CPU",
		"nofile":    "rlimit RLIMIT_NOFILE (hard)",
		"file_size": "rlimit RLIMIT_FSIZE",
		"work_size": "tmpfs size (a host tmpfs mounted on the work dir)",
	}
	why := h.CgroupInfo
	stand := map[string]string{
		"memory": "rlimit RLIMIT_AS per process (no cgroup memory controller: " + why + ")",
		"pids":   "rlimit RLIMIT_NPROC in the sandbox's user namespace (no cgroup pids controller: " + why + ")",
		"cpus":   "not enforced (no cgroup cpu controller: " + why + ")",
	}
	for k, controller := range map[string]string{"memory": "memory", "pids": "pids", "cpus": "cpu"} {
		v, ok := h.Mechanisms[controller]
		switch {
		case !ok || h.Cgroups == nil:
			m[k] = stand[k]
		case k == "pids":
			m[k] = v + fmt.Sprintf(" (limit + %d for %s)", extra, tasks)
		default:
			m[k] = v
		}
	}
	return m
}

// ProgramLeafPids is Enforcement["pids"] of a backend with
// Options.ProgramLeaf on a host with a pids controller: the program's
// tasks are held to the limit exactly; helpers, extra of them, are held
// above the leaf. It returns "" without a pids controller.
func (h *Host[F]) ProgramLeafPids(extra int, helpers string) string {
	v, ok := h.Mechanisms["pids"]
	if !ok || h.Cgroups == nil {
		return ""
	}
	return fmt.Sprintf("%s on a leaf holding only the program (the limit exactly; %s, up to %d, count in the sandbox's cgroup above it)", v, helpers, extra)
}
