package platinum_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sseServer serves events 1..n, cutting the connection after `per`
// events, and records each request's Last-Event-ID.
type sseServer struct {
	n, per int
	mu     sync.Mutex
	resume []string
}

func (s *sseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.resume = append(s.resume, r.Header.Get("Last-Event-ID"))
	s.mu.Unlock()
	after, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "retry: 2000\n: connected\n\n")
	sent := 0
	for id := after + 1; id <= s.n && sent < s.per; id++ {
		fmt.Fprintf(w, ": heartbeat\n\nid: %d\nevent: state_changed\ndata: {\"id\":%d,\"type\":\"state_changed\",\"org_id\":\"org_a\",\"data\":{\"from\":\"creating\",\"to\":\"running\",\"reason\":\"\"},\"created_at\":\"2026-11-29T15:04:05.123456Z\"}\n\n", id, id)
		sent++
	}
	w.(http.Flusher).Flush()
	if after+sent >= s.n {
		<-r.Context().Done() // nothing more: hold the stream open
	}
}

func TestFollowResumesWithLastEventID(t *testing.T) {
	srv := &sseServer{n: 5, per: 2}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := platinum.New(hs.URL, "tok")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ids []int64
	done := errors.New("done")
	err := c.Events.Follow(ctx, platinum.EventFilter{}, 0, func(e platinum.Event) error {
		ids = append(ids, e.ID)
		if from, to, _, ok := e.StateChange(); !ok || from != platinum.StateCreating || to != platinum.StateRunning {
			t.Errorf("event %d: state change %v %v %v", e.ID, from, to, ok)
		}
		if len(ids) == 5 {
			return done
		}
		return nil
	})
	if !errors.Is(err, done) {
		t.Fatalf("Follow = %v", err)
	}
	if want := []int64{1, 2, 3, 4, 5}; !slices.Equal(ids, want) {
		t.Errorf("events = %v, want %v", ids, want)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if want := []string{"", "2", "4"}; !slices.Equal(srv.resume, want) {
		t.Errorf("Last-Event-ID of each connection = %q, want %q", srv.resume, want)
	}
}

func TestFollowStopsOnRefusal(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"code":"forbidden","error":"no"}`)
	}))
	defer hs.Close()
	err := platinum.New(hs.URL, "tok").Events.Follow(context.Background(), platinum.EventFilter{}, 0, func(platinum.Event) error { return nil })
	if !platinum.IsCode(err, platinum.CodeForbidden) {
		t.Fatalf("Follow = %v, want forbidden", err)
	}
}

func sign(secret string, ts int64, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%d.%s", ts, body)
	return fmt.Sprintf("t=%d,v1=%s", ts, hex.EncodeToString(mac.Sum(nil)))
}

func TestVerifyWebhook(t *testing.T) {
	const secret, body = "whsec_0123456789abcdef", `{"id":1}`
	now := time.Now().Unix()
	tests := []struct {
		name   string
		header string
		body   string
		ok     bool
	}{
		{"valid", sign(secret, now, body), body, true},
		{"two signatures, one valid", sign(secret, now, body) + ",v1=00", body, true},
		{"altered body", sign(secret, now, body), `{"id":2}`, false},
		{"other secret", sign("whsec_other_secret_xx", now, body), body, false},
		{"stale", sign(secret, now-3600, body), body, false},
		{"future", sign(secret, now+3600, body), body, false},
		{"malformed", "v1=abc", body, false},
		{"empty", "", body, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := platinum.VerifyWebhook(secret, tc.header, []byte(tc.body), 0)
			if (err == nil) != tc.ok {
				t.Fatalf("VerifyWebhook = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, platinum.ErrBadSignature) {
				t.Errorf("error %v does not wrap ErrBadSignature", err)
			}
		})
	}
}
