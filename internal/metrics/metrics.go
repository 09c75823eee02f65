// Package metrics is ptd's Prometheus instrumentation (docs/observability.md):
// the metric families every layer records into, the HTTP middleware that
// labels requests by route template, and the /metrics handler.
//
// The families are process-wide, like the Go runtime's own: ptd is one
// process serving one host, and recording a number must not need a handle
// threaded through every layer. What is read at scrape time from one
// daemon's state (sandboxes by state, capacity used, the admission queue)
// is a Collector that daemon registers on its own registry (Handler).
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every family.
const Namespace = "platinum"

// Outcomes of a lifecycle operation: ok; refused (the request was wrong for
// the sandbox's state, quota or input: a 4xx); error (the platform failed).
const (
	OutcomeOK      = "ok"
	OutcomeRefused = "refused"
	OutcomeError   = "error"
)

// latencyBuckets span a fast API call (1 ms) to a slow cold start or
// archive (2 min).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

var (
	httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "http_requests_total",
		Help: "HTTP requests answered, by route template (the router's pattern, never the raw path), method and status code.",
	}, []string{"route", "method", "code"})
	httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "http_request_duration_seconds",
		Help:    "Time to answer an HTTP request (to the end of its body), by route template and method.",
		Buckets: latencyBuckets,
	}, []string{"route", "method"})
	lifecycle = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "lifecycle_operation_duration_seconds",
		Help: "Sandbox lifecycle operations (create, start, stop, archive, snapshot, fork, restore) by runtime class and outcome (ok, refused, error); " +
			"asynchronous ones are timed from the request to the state they reach.",
		Buckets: latencyBuckets,
	}, []string{"op", "runtime", "outcome"})
	admissionWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "admission_wait_seconds",
		Help:    "Time a start spent in the admission queue, by outcome (admitted, queue_full, timeout, canceled).",
		Buckets: latencyBuckets,
	}, []string{"outcome"})
	egressConns = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "egress_connections_total",
		Help: "Connections redirected to the egress proxy.",
	})
	egressBlocks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "egress_blocked_total",
		Help: "Egress connections refused, by reason (policy, forbidden, protocol, unknown_source).",
	}, []string{"reason"})
	webhookDeliveries = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "webhook_delivery_duration_seconds",
		Help:    "Webhook delivery attempts by outcome (delivered, retrying, failed), timed to the receiver's answer.",
		Buckets: latencyBuckets,
	}, []string{"outcome"})
	storeQueries = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "store_query_duration_seconds",
		Help:    "Metadata store statements, by connection pool (read, write) and kind (query, exec, begin, commit).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 10},
	}, []string{"pool", "op"})
)

// families are the process-wide collectors every registry serves.
var families = []prometheus.Collector{
	httpRequests, httpDuration, lifecycle, admissionWait,
	egressConns, egressBlocks, webhookDeliveries, storeQueries,
}

// Lifecycle records one lifecycle operation. An empty runtime (the request
// failed before a sandbox was known) is recorded as "unknown".
func Lifecycle(op, runtime, outcome string, d time.Duration) {
	if runtime == "" {
		runtime = "unknown"
	}
	lifecycle.WithLabelValues(op, runtime, outcome).Observe(d.Seconds())
}

// AdmissionWait records how long a start waited for its slot.
func AdmissionWait(outcome string, d time.Duration) {
	admissionWait.WithLabelValues(outcome).Observe(d.Seconds())
}

// EgressConnection counts one connection reaching the egress proxy.
func EgressConnection() { egressConns.Inc() }

// EgressBlocked counts one refused egress connection.
func EgressBlocked(reason string) { egressBlocks.WithLabelValues(reason).Inc() }

// WebhookDelivery records one delivery attempt.
func WebhookDelivery(outcome string, d time.Duration) {
	webhookDeliveries.WithLabelValues(outcome).Observe(d.Seconds())
}

// StoreQuery records one store statement.
func StoreQuery(pool, op string, d time.Duration) {
	storeQueries.WithLabelValues(pool, op).Observe(d.Seconds())
}

// Handler serves the Prometheus text format: the process-wide families,
// the Go runtime and process collectors, and extra (one daemon's state,
// read at scrape time). Each call builds its own registry, so two servers
// in one process (tests) never collide on their extra collectors.
func Handler(extra ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(families...)
	reg.MustRegister(extra...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}
