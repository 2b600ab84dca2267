// Package audit is execbox's audit log: one row per execution (a run, a
// function call, a lint, a tool call), refused ones included, in an
// embedded SQLite database (modernc.org/sqlite, no cgo).
//
// A row (Record) holds who asked (the token's name and the remote
// address), the operation (run, function, lint, tool, or auth for a failed
// authentication; the column "kind"), where it ran (backend, isolation),
// its limits, how it ended (reason, exit code, duration, usage), the
// SHA-256 of the whole request (RequestHash: command or code, files,
// stdin, …) — the code itself only when Options.StoreCode is set, only for
// what ran, and at most MaxCode bytes of it — the stable error code of a
// failure, and what a request brought into a session besides code
// (Inputs: an upload's files, a terminal's input), each by its size and
// SHA-256, never its bytes.
//
// Record and Query are the package's own types: the HTTP API's wire types
// (api/v1) are internal/daemon/server's to convert, so the API's JSON can change
// without changing what is stored. The limits column keeps the form rows
// have always had (the contract's field names, durations in nanoseconds).
//
// Invariants:
//   - Record returns only after the row is committed, so a caller that has
//     its answer can find its row.
//   - The database file and its directory are created private (0600, 0700).
//   - Retention: Prune deletes rows older than Options.MaxAge and the
//     oldest rows beyond Options.MaxRows; a Store prunes when it opens and
//     then every PruneInterval.
//   - Code is never stored unless StoreCode is set, and then at most
//     MaxCode bytes (cut visibly); its hash always is.
//   - A database made by an older execbox gains the columns it lacks
//     (remote, …, terminal, inputs) when opened for writing.
//
// Concurrency: a Store is safe for concurrent use; writes are serialised
// on one connection. Another process may read the database while a Store
// writes (WAL mode), e.g. `execbox audit`.
package audit
