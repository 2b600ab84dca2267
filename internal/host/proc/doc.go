// Package proc supervises one started process tree for a host-process
// backend (local, native, bwrap): it wires stdin and the capped stdout and
// stderr, enforces the wall-clock limit, and makes sure nothing outlives the
// run — the backend's Kill is called on timeout, cancel or output limit, and
// again after the main process exits, so stragglers (double-forked, setsid)
// holding the output pipes die too. Output produced before a kill is kept;
// the pipes are drained for at most a grace period afterwards.
//
// Run is safe for concurrent use on different commands.
package proc
