// Package reexec runs registered entry points of the current binary as child
// processes: a sandbox's init or reaper helper is the execbox binary (or the
// test binary) started again under a marker argv[0].
//
// An entry point is registered from an init function with Entry. When the
// process was started as that entry point, Entry runs it and exits at once,
// before main (or TestMain) and before the packages initialised after the
// caller, so helpers start fast and never run the rest of the program.
//
// Command builds the exec.Cmd for an entry point. It runs /proc/self/exe,
// so it works under `go run`, `go test` and an installed binary alike. A
// launcher that runs the binary itself and cannot choose argv[0] (bwrap
// before 0.9) passes Arg0(name) as the only argument instead.
//
// Entry points take their configuration from donated file descriptors or
// argv, never from the environment (a helper that stays inside a sandbox
// has an empty environment). Entry is safe only during package
// initialisation; Command is safe for concurrent use.
package reexec
