package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/metrics"
	"github.com/platinum-dev/platinum/internal/requestid"
)

// BenchmarkGetSandboxInProcess serves GET /v1/sandboxes/{id} through the
// whole handler chain (request id, metrics, auth, store read, encoding)
// without sockets, for CPU and allocation profiles of the hot read
// (-cpuprofile); requests/s over loopback are bench/api's job.
func BenchmarkGetSandboxInProcess(b *testing.B) {
	h := &slowHost{release: make(chan struct{})}
	close(h.release)
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	_, cp, api := newEventsStack(b, h, log)
	cp.SkipAgentInit()
	handler := requestid.Middleware(metrics.InstrumentLog(log, api))
	srv := httptest.NewServer(handler)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/sandboxes?wait_for_state=running", strings.NewReader(`{"template":"busybox"}`))
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var sb struct{ ID string }
	err = json.NewDecoder(resp.Body).Decode(&sb)
	resp.Body.Close()
	if err != nil || sb.ID == "" {
		b.Fatalf("create: %d, id %q, %v", resp.StatusCode, sb.ID, err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := httptest.NewRequest("GET", "/v1/sandboxes/"+sb.ID, nil)
			r.Header.Set("Authorization", "Bearer tok")
			w := httptest.NewRecorder()
			handler.ServeHTTP(w, r)
			if w.Code != 200 {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	})
}
