package reexec

import (
	"os"
	"os/exec"
	"syscall"
)

const prefix = "execbox-reexec:"

// Entry registers main as the entry point name. If this process was started
// as that entry point (see Is), Entry runs main and exits with status 0 if
// main returns. Call it from an init function.
func Entry(name string, main func()) {
	if Is(name) {
		main()
		Exit(0)
	}
}

// Exit ends a helper process at once. Unlike os.Exit it skips the exit
// hooks, among them the race detector's one-second exit delay, which every
// sandbox would otherwise pay in race-enabled tests.
func Exit(code int) { syscall.Exit(code) }

// Command returns a Cmd that starts the entry point name of this binary with
// args. Its environment is empty unless the caller sets Env.
func Command(name string, args ...string) *exec.Cmd {
	return &exec.Cmd{
		Path: "/proc/self/exe",
		Args: append([]string{prefix + name}, args...),
		Env:  []string{},
	}
}

// Arg0 is the argv[0] that starts the entry point name, for callers that
// fork and exec /proc/self/exe themselves.
func Arg0(name string) string { return prefix + name }

// Is reports whether this process is the entry point name: its argv[0] is
// Arg0(name) (Command), or — from a launcher that sets argv[0] to the path
// it runs, as bwrap does — Arg0(name) is its one argument.
func Is(name string) bool {
	m := prefix + name
	return len(os.Args) > 0 && os.Args[0] == m || len(os.Args) == 2 && os.Args[1] == m
}
