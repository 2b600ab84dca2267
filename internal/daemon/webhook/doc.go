// Package webhook POSTs execbox's events to a URL the operator configured
// (events.webhook_url): one JSON event per request, signed with an HMAC of
// a shared secret so the receiver can tell them from forgeries, retried
// with backoff on a network error, 429 or 5xx, and bounded: the events
// wait in a queue of a fixed size, and what does not fit is dropped and
// counted, so that a slow or dead receiver never slows an execution.
package webhook
