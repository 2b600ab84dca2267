// Package errmap maps execbox's error kinds (sandbox.Kind) to what each
// transport speaks, in one place: HTTP statuses and back, CLI exit codes,
// and the kinds of the function protocol's error codes.
//
// A kind carries only its stable code; every other package asks here. It
// imports only the standard library and the sandbox contract, so the wire
// package api/v1 and the Go client can use it.
//
// Concurrency: every function is safe for concurrent use; the tables are
// never written after initialisation.
package errmap
