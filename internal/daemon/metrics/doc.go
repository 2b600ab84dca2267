// Package metrics holds execbox's Prometheus metrics on a registry of its
// own (never the global one), served by Handler:
//
//	execbox_executions_total{kind,backend,reason}  executions that ended
//	execbox_execution_duration_seconds{kind}       their duration (histogram)
//	execbox_executions_in_flight{kind}             executions running now
//	execbox_busy_rejections_total{kind,code}       refusals: busy, rate_limited, too_many_in_flight
//	execbox_http_requests_total{route,code}        HTTP answers by route and status
//	execbox_audit_errors_total                     audit rows that could not be written
//	execbox_auth_failures_total{code}              401s and auth_throttled 429s
//	execbox_connections_shed_total{reason}         connections evicted or refused by the bounds
//	execbox_connections_open                       connections open now (the server's gauge)
//	execbox_run_slots_in_use, execbox_run_slots    the engine's run gate (the server's gauges)
//	execbox_result_memory_reserved_bytes,          result memory reserved by admitted runs, and
//	execbox_result_memory_bytes                    its bound
//
// plus the Go runtime and process collectors (go_goroutines,
// process_open_fds, …), which the load test reads to find leaks.
//
// kind is the execution's operation (v1.Operation, the audit log's
// "kind"): run, function, lint or tool; backend is the backend that ran the
// code, or "none"; reason is a run's sandbox reason, or for functions "ok"
// or the response's error code.
//
// Label values come from small fixed sets (never from request text), so
// the series count is bounded.
//
// Concurrency: a Metrics is safe for concurrent use.
package metrics
