package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func scrape(t *testing.T) string {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// TestInstrument: a request is counted under the route its handler named,
// or "unmatched"; streams still flush through the middleware; an inner
// Instrument does not count twice.
func TestInstrument(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /things/{id}", func(w http.ResponseWriter, r *http.Request) {
		SetRoute(r.Context(), "GET /things/{id}")
		if _, ok := w.(http.Flusher); !ok {
			t.Error("the writer lost http.Flusher")
		}
		w.WriteHeader(http.StatusAccepted)
	})
	h := Instrument(Instrument(mux))
	for _, p := range []string{"/things/a1", "/things/b2", "/nowhere/zz9"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", p, nil))
	}
	Lifecycle("create", "", OutcomeRefused, time.Millisecond)
	text := scrape(t)
	for _, want := range []string{
		`platinum_http_requests_total{code="202",method="GET",route="GET /things/{id}"} 2`,
		`platinum_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`platinum_lifecycle_operation_duration_seconds_count{op="create",outcome="refused",runtime="unknown"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(text, "a1") || strings.Contains(text, "zz9") {
		t.Error("a raw path became a label")
	}
}
