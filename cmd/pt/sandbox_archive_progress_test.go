package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestSandboxArchiveWaitShowsProgress: `pt sandbox archive ID --wait`
// prints the archive's progress (percent and MB) while it runs, then the
// final state.
func TestSandboxArchiveWaitShowsProgress(t *testing.T) {
	var mu sync.Mutex
	reads := []map[string]any{
		{"state": "archiving", "progress": map[string]any{"op": "archive", "done_bytes": 256 << 20, "total_bytes": 1024 << 20}},
		{"state": "archiving", "progress": map[string]any{"op": "archive", "done_bytes": 768 << 20, "total_bytes": 1024 << 20}},
		{"state": "archived"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		body := map[string]any{"id": "sbx_1", "state": "archiving"}
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/sandboxes/sbx_1/archive":
		case r.Method == "GET" && r.URL.Path == "/v1/sandboxes/sbx_1":
			for k, v := range reads[0] {
				body[k] = v
			}
			if len(reads) > 1 {
				reads = reads[1:]
			}
		default:
			http.Error(w, `{"code":"not_found","error":"no route"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	r := runPT(t, srv.URL, "tok", "", nil, "sandbox", "archive", "sbx_1", "--wait")
	want := "sandbox sbx_1: archiving…\n" +
		"sandbox sbx_1: archiving… archive 25% (256 of 1024 MB)\n" +
		"sandbox sbx_1: archiving… archive 75% (768 of 1024 MB)\n" +
		"sandbox sbx_1: archived\n"
	if r.code != 0 || r.stdout != "sandbox sbx_1: archived\n" || r.stderr != want {
		t.Errorf("exit %d\nstdout %q\nstderr %q\nwant stderr %q", r.code, r.stdout, r.stderr, want)
	}
}
