package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestMetrics(t *testing.T) {
	m := New()
	done := m.Start("run")
	m.Start("function")
	if s := scrape(t, m); !strings.Contains(s, `execbox_executions_in_flight{kind="run"} 1`) {
		t.Fatalf("in flight:\n%s", s)
	}
	done()
	m.Executed("run", "native", "exited", 1500*time.Millisecond)
	m.Executed("run", "", "invalid_request", time.Millisecond)
	m.Busy("function", "busy")
	m.Request("POST /v1/runs", 200)
	m.AuditError()
	s := scrape(t, m)
	for _, want := range []string{
		`execbox_executions_in_flight{kind="run"} 0`,
		`execbox_executions_in_flight{kind="function"} 1`,
		`execbox_executions_total{backend="native",kind="run",reason="exited"} 1`,
		`execbox_executions_total{backend="none",kind="run",reason="invalid_request"} 1`,
		`execbox_execution_duration_seconds_bucket{kind="run",le="2.5"} 2`,
		`execbox_execution_duration_seconds_bucket{kind="run",le="1"} 1`,
		`execbox_execution_duration_seconds_count{kind="run"} 2`,
		`execbox_busy_rejections_total{code="busy",kind="function"} 1`,
		`execbox_http_requests_total{code="200",route="POST /v1/runs"} 1`,
		`execbox_audit_errors_total 1`,
		`go_goroutines `,
		`process_open_fds `,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %s", want)
		}
	}
	// Registries are separate: a second Metrics starts from zero.
	if s := scrape(t, New()); strings.Contains(s, "execbox_audit_errors_total 1") {
		t.Error("metrics leaked between instances")
	}
}
