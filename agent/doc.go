// Package agent runs a session's agent: one lasting process (python3) in
// the session's sandbox that hosts what must outlive a single Exec and run
// beside others — interpreter contexts that keep their state between calls
// (Python, JavaScript), programs on a terminal (a PTY in the sandbox), and
// the session's execs while it runs (a sandbox runs one Exec at a time, and
// the agent is that one).
//
// The engine talks to it over its stdin and stdout in JSON lines (see
// runtime/agent.py). Each context is its own interpreter process, started
// by the agent: a call is interrupted at its timeout (SIGINT: a
// KeyboardInterrupt in Python, vm's own timeout in JavaScript) and the
// context lives on; a context whose interpreter dies or does not stop is
// reported lost. Everything the agent runs is inside the sandbox, under its
// limits; when the sandbox closes, all of it ends.
package agent
