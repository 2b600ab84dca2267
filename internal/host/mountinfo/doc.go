// Package mountinfo reads the mounts a process sees, from
// /proc/<pid>/mountinfo, with the escapes the kernel puts in their paths
// undone. The cgroup manager finds its hierarchies with it, and workdir
// the mounts below a directory it is about to remove.
package mountinfo
