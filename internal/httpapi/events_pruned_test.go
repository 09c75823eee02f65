package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/tenancy"
)

// TestEventCursorOlderThanRetention: once retention pruned events, a
// cursor below the newest pruned ID (after= or the SSE Last-Event-ID) is
// 410 events_pruned with pruned_through; resuming from there, or from 0,
// is served.
func TestEventCursorOlderThanRetention(t *testing.T) {
	ctx := context.Background()
	st, _, api := newEventsStack(t, &slowHost{release: make(chan struct{})}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := serveAPI(t, api)
	for range 3 {
		if err := st.AddEvent(ctx, tenancy.DefaultOrgID, "", "hello", nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.PruneEvents(ctx, time.Now().Add(time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	through, err := st.EventsPrunedThrough(ctx)
	if err != nil || through == 0 {
		t.Fatalf("pruned through %d, %v", through, err)
	}
	get := func(query, lastID string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/v1/events?"+query, nil)
		req.Header.Set("Authorization", "Bearer tok")
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		resp, err := http.DefaultClient.Do(req.WithContext(cctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if resp.Header.Get("Content-Type") == "application/json" {
			json.NewDecoder(resp.Body).Decode(&m)
		}
		return resp.StatusCode, m
	}
	tests := []struct {
		name, query, lastID string
		want                int
	}{
		{"json page from a pruned cursor", "format=json&after=1", "", http.StatusGone},
		{"stream resumed from a pruned Last-Event-ID", "", "1", http.StatusGone},
		{"json page from the watermark", "format=json&after=" + strconv.FormatInt(through, 10), "", http.StatusOK},
		{"json page from the start", "format=json&after=0", "", http.StatusOK},
		{"stream from the watermark", "", strconv.FormatInt(through, 10), http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, m := get(tc.query, tc.lastID)
			if st != tc.want {
				t.Fatalf("status %d (%v), want %d", st, m, tc.want)
			}
			if st == http.StatusGone && (m["code"] != "events_pruned" || m["pruned_through"] != float64(through)) {
				t.Errorf("410 body %v, want events_pruned with pruned_through %d", m, through)
			}
		})
	}
}
