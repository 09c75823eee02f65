package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/metrics"
	"github.com/platinum-dev/platinum/internal/metrics/metricstest"
)

func scrape(t *testing.T) string {
	t.Helper()
	rec := httptest.NewRecorder()
	metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// TestInstrument: a request is counted under the route its handler named,
// or "unmatched"; streams still flush through the middleware; an inner
// Instrument does not count twice. The collectors are the process's, so
// it checks what its own calls added (and holds with -count=N).
func TestInstrument(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /things/{id}", func(w http.ResponseWriter, r *http.Request) {
		metrics.SetRoute(r.Context(), "GET /things/{id}")
		if _, ok := w.(http.Flusher); !ok {
			t.Error("the writer lost http.Flusher")
		}
		w.WriteHeader(http.StatusAccepted)
	})
	want := map[string]float64{
		`platinum_http_requests_total{code="202",method="GET",route="GET /things/{id}"}`:                       2,
		`platinum_http_requests_total{code="404",method="GET",route="unmatched"}`:                              1,
		`platinum_lifecycle_operation_duration_seconds_count{op="create",outcome="refused",runtime="unknown"}`: 1,
	}
	before := map[string]float64{}
	for series := range want {
		before[series] = metricstest.Value(t, series)
	}
	h := metrics.Instrument(metrics.Instrument(mux))
	for _, p := range []string{"/things/a1", "/things/b2", "/nowhere/zz9"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", p, nil))
	}
	metrics.Lifecycle("create", "", metrics.OutcomeRefused, time.Millisecond)
	for series, n := range want {
		if got := metricstest.Value(t, series) - before[series]; got != n {
			t.Errorf("%s went up by %v, want %v", series, got, n)
		}
	}
	text := scrape(t)
	if !strings.Contains(text, "go_goroutines") {
		t.Error("scrape lacks go_goroutines")
	}
	if strings.Contains(text, "a1") || strings.Contains(text, "zz9") {
		t.Error("a raw path became a label")
	}
}
