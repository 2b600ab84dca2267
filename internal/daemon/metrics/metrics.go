package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the server's metrics.
type Metrics struct {
	reg         *prometheus.Registry
	executions  *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	inFlight    *prometheus.GaugeVec
	busy        *prometheus.CounterVec
	requests    *prometheus.CounterVec
	auditErrors prometheus.Counter
	authFailed  *prometheus.CounterVec
	connsClosed *prometheus.CounterVec
	admitWait   *prometheus.HistogramVec
	sessions    *prometheus.CounterVec
	poolEvents  *prometheus.CounterVec
	poolReady   *prometheus.GaugeVec
	poolRefill  *prometheus.HistogramVec
	evDropped   *prometheus.CounterVec
	evStreams   prometheus.Gauge
	webhook     *prometheus.CounterVec
}

// New returns a Metrics on a fresh registry.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "execbox_executions_total",
			Help: "Executions that ended, by kind, backend and reason (a run's sandbox reason; for functions ok or the error code).",
		}, []string{"kind", "backend", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "execbox_execution_duration_seconds",
			Help:    "Duration of executions, sandbox set-up included.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"kind"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "execbox_executions_in_flight",
			Help: "Executions running now.",
		}, []string{"kind"}),
		busy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "execbox_busy_rejections_total",
			Help: "Executions refused because a limit was reached (HTTP 429), by kind and code.",
		}, []string{"kind", "code"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "execbox_http_requests_total",
			Help: "HTTP requests answered, by route and status code.",
		}, []string{"route", "code"}),
		auditErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "execbox_audit_errors_total",
			Help: "Audit records that could not be written.",
		}),
		authFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "execbox_auth_failures_total",
			Help: "Requests refused by authentication, by code: unauthenticated (401) or auth_throttled (429: the address failed too often).",
		}, []string{"code"}),
		connsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "execbox_connections_shed_total",
			Help: "Connections closed by the connection bounds, by reason: evicted (the oldest idle or unauthenticated one, for a new one) or refused (nothing to evict).",
		}, []string{"reason"}),
	}
	m.admitWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "execbox_admission_wait_seconds",
		Help:    "How long runs waited in the admission queue, by outcome (admitted, or refused when the queue was full or the wait passed).",
		Buckets: []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"outcome"})
	m.sessions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "execbox_session_events_total",
		Help: "Session events, by event: created, closed (by its owner or at shutdown), expired (ttl), idle (idle timeout).",
	}, []string{"event"})
	m.poolEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "execbox_pool_events_total",
		Help: "Warm pool events, by backend, language and event: hit (a call took a ready sandbox), miss (none was ready: a cold start), made, failed, lost (a ready one ended unused), expired (replaced at pools.max_age).",
	}, []string{"backend", "language", "event"})
	m.poolReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "execbox_pool_ready",
		Help: "Ready sandboxes in each warm pool (at most pools.size).",
	}, []string{"backend", "language"})
	m.poolRefill = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "execbox_pool_refill_seconds",
		Help:    "How long making a pooled sandbox (and starting its runner) took, by backend.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"backend"})
	m.evDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "execbox_events_dropped_total",
		Help: "Events a subscriber lost because it did not keep up (its queue was full), by subscriber: sse (a GET /v1/events stream), webhook, or a library subscriber's name.",
	}, []string{"subscriber"})
	m.evStreams = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "execbox_event_streams",
		Help: "GET /v1/events streams open now (at most events.max_streams).",
	})
	m.webhook = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "execbox_webhook_deliveries_total",
		Help: "Events POSTed to the configured webhook, by result: delivered (2xx), rejected (another status but 429 and 5xx: not retried), failed (no success within the retries).",
	}, []string{"result"})
	m.reg.MustRegister(m.admitWait, m.sessions, m.poolEvents, m.poolReady, m.poolRefill, m.evDropped, m.evStreams, m.webhook)
	m.reg.MustRegister(m.executions, m.duration, m.inFlight, m.busy, m.requests, m.auditErrors, m.authFailed, m.connsClosed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// EventDropped counts an event subscriber lost.
func (m *Metrics) EventDropped(subscriber string) { m.evDropped.WithLabelValues(subscriber).Inc() }

// EventStream counts an events stream opened (+1) or ended (-1).
func (m *Metrics) EventStream(delta float64) { m.evStreams.Add(delta) }

// WebhookDelivery counts one event's delivery to the webhook by result.
func (m *Metrics) WebhookDelivery(result string) { m.webhook.WithLabelValues(result).Inc() }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Start counts one execution of operation op in flight until done is
// called.
func (m *Metrics) Start(op string) (done func()) {
	g := m.inFlight.WithLabelValues(op)
	g.Inc()
	return g.Dec
}

// Executed records an execution of operation op that ended.
func (m *Metrics) Executed(op, backend, reason string, d time.Duration) {
	if backend == "" {
		backend = "none"
	}
	m.executions.WithLabelValues(op, backend, reason).Inc()
	m.duration.WithLabelValues(op).Observe(d.Seconds())
}

// Busy records a refusal of operation op with code.
func (m *Metrics) Busy(op, code string) { m.busy.WithLabelValues(op, code).Inc() }

// Request records an HTTP answer; route is the matched pattern.
func (m *Metrics) Request(route string, status int) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
}

// AdmissionWait records a run's wait for admission and its outcome.
func (m *Metrics) AdmissionWait(d time.Duration, admitted bool) {
	outcome := "refused"
	if admitted {
		outcome = "admitted"
	}
	m.admitWait.WithLabelValues(outcome).Observe(d.Seconds())
}

// AuditError records an audit row that could not be written.
func (m *Metrics) AuditError() { m.auditErrors.Inc() }

// AuthFailed records a request refused by authentication with code.
func (m *Metrics) AuthFailed(code string) { m.authFailed.WithLabelValues(code).Inc() }

// SessionEvent counts a session event.
func (m *Metrics) SessionEvent(event string) { m.sessions.WithLabelValues(event).Inc() }

// PoolEvent records an event of the warm pool of backend and language,
// which has ready sandboxes now; took is how long making one took (made).
func (m *Metrics) PoolEvent(backend, language, event string, ready int, took time.Duration) {
	m.poolEvents.WithLabelValues(backend, language, event).Inc()
	m.poolReady.WithLabelValues(backend, language).Set(float64(ready))
	if event == "made" {
		m.poolRefill.WithLabelValues(backend).Observe(took.Seconds())
	}
}

// ConnShed records a connection closed by the connection bounds; reason is
// "evicted" or "refused".
func (m *Metrics) ConnShed(reason string) { m.connsClosed.WithLabelValues(reason).Inc() }

// Gauge registers a gauge read from f at each scrape. A second gauge of
// the same name is ignored: the first one stays.
func (m *Metrics) Gauge(name, help string, f func() float64) {
	m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// GaugeByLabel registers a gauge with one label, read from f at each
// scrape: a series per key of what f returns.
func (m *Metrics) GaugeByLabel(name, help, label string, f func() map[string]float64) {
	m.reg.Register(&labelledGauge{desc: prometheus.NewDesc(name, help, []string{label}, nil), f: f})
}

// labelledGauge is GaugeByLabel's collector.
type labelledGauge struct {
	desc *prometheus.Desc
	f    func() map[string]float64
}

func (g *labelledGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *labelledGauge) Collect(ch chan<- prometheus.Metric) {
	for k, v := range g.f() {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v, k)
	}
}
