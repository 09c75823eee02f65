package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/events"
	"github.com/platinum-dev/platinum/internal/metrics"
	"github.com/platinum-dev/platinum/internal/requestid"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// BenchmarkGetSandboxInProcess serves GET /v1/sandboxes/{id} through the
// whole handler chain (request id, metrics, auth, store read, encoding)
// without sockets, for CPU and allocation profiles of the hot read
// (-cpuprofile); requests/s over loopback are bench/api's job.
func BenchmarkGetSandboxInProcess(b *testing.B) {
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	h := &slowHost{release: make(chan struct{})}
	close(h.release)
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	feed := &events.Feed{}
	fst := feed.Wrap(st)
	tn := tenancy.New(tenancy.DefaultConfig(), fst, log)
	cp := controlplane.New(controlplane.DefaultConfig(), fst, h, tn, log)
	ev := events.New(events.DefaultConfig(), fst, feed, log)
	cp.SkipAgentInit()
	if _, err := tn.Bootstrap(context.Background(), "tok"); err != nil {
		b.Fatal(err)
	}
	defer cp.Close()
	defer ev.Close()
	api := New(Deps{Sandboxes: cp, Tenancy: tn, Events: ev}, log)
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
