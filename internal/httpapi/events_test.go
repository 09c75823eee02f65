package httpapi

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/tenancy"
)

// TestEventStreamEndsAtShutdown checks that Shutdown ends an open event
// stream (http.Server.Shutdown would otherwise wait for it forever) after
// the stream has delivered what was committed.
func TestEventStreamEndsAtShutdown(t *testing.T) {
	st, _, api := newEventsStack(t, &slowHost{release: make(chan struct{})}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := serveAPI(t, api) // closed before the control plane

	resp := send(t, srv, "tok", "GET", "/v1/events?heartbeat_ms=100", "")
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if err := st.AddEvent(context.Background(), tenancy.DefaultOrgID, "sbx_1", "hello", nil); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var got []string
	for l := range lines {
		got = append(got, l)
		if strings.HasPrefix(l, "data: ") {
			break
		}
	}
	if !strings.Contains(strings.Join(got, "\n"), "event: hello") {
		t.Fatalf("stream before the event: %q", got)
	}
	api.Shutdown()
	api.Shutdown() // twice is fine
	done := time.After(time.Minute)
	for {
		select {
		case _, ok := <-lines:
			if !ok {
				return // the stream ended
			}
		case <-done:
			t.Fatal("the stream did not end after Shutdown")
		}
	}
}
