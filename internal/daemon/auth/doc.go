// Package auth checks the HTTP API's bearer tokens and applies each
// token's limits.
//
// A token is configured as "NAME:SHA256HEX[:OPTION]...": the name shown in
// logs and the audit log, the hex SHA-256 of the secret (the secret itself
// is never stored), and options admin, concurrency=N, rate=R (requests per
// second) and burst=N. EXECBOX_TOKEN=<secret> adds one admin token named
// "default" (FromSecret).
//
// Invariants:
//   - The presented secret is hashed and compared with every configured
//     hash in constant time; the time taken does not depend on which token
//     matched or how much of a hash did.
//   - With no token configured, Authenticate admits everyone as the
//     non-admin identity "anonymous"; callers decide where that is allowed
//     (execbox serve refuses to listen beyond loopback then).
//   - Names and hashes are unique; a malformed entry is an error naming it.
//   - Admit enforces a token's rate (a token bucket) and its concurrency
//     (in-flight executions); refusals are sandbox.ErrBusy with a
//     Retry-After hint (RetryAfter).
//   - Check bounds failed authentications per remote address (a token
//     bucket, Limits.FailureRate and FailureBurst, over at most 4096
//     addresses): while an address's budget is spent its requests are
//     refused before their token is looked at (ErrBusy, CodeAuthThrottled),
//     so guessing secrets is slow and floods of bad tokens are cheap.
//   - Errors carry this package's codes (CodeUnauthenticated,
//     CodeRateLimited, CodeTooManyInFlight, CodeAuthThrottled); the HTTP API documents the
//     same codes in api/v1, which this package does not import.
//
// Concurrency: an Authenticator and its Identities are safe for concurrent
// use.
package auth
