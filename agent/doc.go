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
//
// Invariants:
//   - Nothing waits on the agent without a bound. A request line must be
//     taken within a few seconds (and within its caller's deadline and a
//     moment); an agent that does not take one — stopped by its own
//     program, or stuck — is ended, and every call waiting on it fails
//     agent_lost. An exec's wall limit runs from before its request is sent.
//   - An exec's whole tree ends with it. The agent is its programs'
//     subreaper (it refuses to start where it cannot be): a program that
//     leaves its process group and session becomes the agent's orphan, and
//     orphans are killed when an exec, a terminal's program or a context's
//     call ends, their CPU time counted in it.
//   - A Resize returns once the size is set; the program reads it from then.
package agent
