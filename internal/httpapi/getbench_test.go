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

// getBenchStack is the API behind ptd's outer chain (request id, metrics
// with the access log at Info, as ptd runs by default) with one running
// sandbox made by token "tok" from body (a create request): the handler
// and the sandbox's id.
func getBenchStack(b testing.TB, body string) (http.Handler, string) {
	b.Helper()
	h := &slowHost{release: make(chan struct{})}
	close(h.release)
	log := slog.New(requestid.NewLogHandler(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})))
	_, cp, api := newEventsStack(b, h, log)
	cp.SkipAgentInit()
	handler := requestid.Middleware(metrics.InstrumentLog(log, api))
	srv := httptest.NewServer(handler)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/sandboxes?wait_for_state=running", strings.NewReader(body))
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
	return handler, sb.ID
}

// BenchmarkGetSandboxInProcess serves GET /v1/sandboxes/{id} through the
// whole handler chain (request id, metrics, auth, store read, encoding)
// without sockets, for CPU and allocation profiles of the hot read
// (-cpuprofile); requests/s over loopback are bench/api's job. The
// recorder and request it makes per call are part of its allocations.
func BenchmarkGetSandboxInProcess(b *testing.B) {
	handler, id := getBenchStack(b, `{"template":"busybox"}`)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := httptest.NewRequest("GET", "/v1/sandboxes/"+id, nil)
			r.Header.Set("Authorization", "Bearer tok")
			w := httptest.NewRecorder()
			handler.ServeHTTP(w, r)
			if w.Code != 200 {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	})
}

// BenchmarkGetLoopback is what bench/api measures, in one process: GETs
// from 32 keep-alive connections through a real server on loopback, for
// /healthz (the HTTP stack alone) and GET /v1/sandboxes/{id}. Its ns/op
// and allocs/op include the client's; the difference between the two
// routes is the handler's own cost, and the ratio of their ns/op is the
// one bench/api reports in requests/s.
func BenchmarkGetLoopback(b *testing.B) {
	handler, id := getBenchStack(b, `{"template":"busybox"}`)
	srv := httptest.NewServer(handler)
	defer srv.Close()
	for _, rt := range []struct{ name, path, token string }{
		{"healthz", "/healthz", ""},
		{"sandbox", "/v1/sandboxes/" + id, "tok"},
	} {
		b.Run(rt.name, func(b *testing.B) {
			tr := &http.Transport{MaxIdleConns: 32, MaxIdleConnsPerHost: 32, MaxConnsPerHost: 32}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			b.SetParallelism(16) // 32 connections on 2 cores, as bench/api's default
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				req, _ := http.NewRequest("GET", srv.URL+rt.path, nil)
				if rt.token != "" {
					req.Header.Set("Authorization", "Bearer "+rt.token)
				}
				for pb.Next() {
					resp, err := hc.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Fatalf("%s: %d", rt.path, resp.StatusCode)
					}
				}
			})
		})
	}
}
