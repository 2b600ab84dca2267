// Package event is execbox's lifecycle events: an execution started,
// completed or failed (and each retried attempt), a session was created,
// closed, expired or reaped idle. The engine publishes them on a Bus; a
// subscriber — the Go API's, the server's /v1/events stream, the webhook —
// gets them through a bounded buffer of its own, so that a slow subscriber
// never slows an execution down: what does not fit is dropped and counted.
package event
