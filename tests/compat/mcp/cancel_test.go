package mcpcompat

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// holdingProxy stands between pt mcp and ptd: it forwards every request
// to ptd, except the ones hold picks, which it keeps without forwarding
// until the client ends them (reported on cancelled) or the test ends.
// It makes a snapshot or fork last as long as the test needs, so the
// cancel lands while the /v1 request is in flight; what is checked is
// that pt mcp ends that request when its MCP call is cancelled.
type holdingProxy struct {
	*httptest.Server
	hold            func(*http.Request) bool
	held, cancelled chan string
	release         chan struct{}
}

func newHoldingProxy(t *testing.T, hold func(*http.Request) bool) *holdingProxy {
	t.Helper()
	target, err := url.Parse(env.url)
	if err != nil {
		t.Fatal(err)
	}
	p := &holdingProxy{hold: hold, held: make(chan string, 8), cancelled: make(chan string, 8), release: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(target)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.hold(r) {
			rp.ServeHTTP(w, r)
			return
		}
		what := r.Method + " " + r.URL.Path
		// Read the body as ptd does: net/http notices a client going away
		// only once the request body has been read.
		io.Copy(io.Discard, r.Body)
		p.held <- what
		select {
		case <-r.Context().Done():
			p.cancelled <- what
		case <-p.release:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict) // not retried
			w.Write([]byte(`{"error":"held by the test","code":"conflict"}`))
		}
	}))
	t.Cleanup(func() {
		close(p.release)
		p.Close()
	})
	return p
}

// TestCancelSnapshotFork: cancelling a snapshot_sandbox or fork_sandbox
// call made through pt mcp ends its /v1 request, and nothing reaches ptd:
// the sandbox has no snapshot and no copies afterwards.
func TestCancelSnapshotFork(t *testing.T) {
	need(t)
	proxy := newHoldingProxy(t, func(r *http.Request) bool {
		return r.Method == "POST" && (strings.HasSuffix(r.URL.Path, "/snapshots") || strings.HasSuffix(r.URL.Path, "/fork"))
	})
	s := dial(t, "stdio", proxy.URL, env.token)
	sb := s.create(nil) // through the proxy, which forwards it
	for tool, path := range map[string]string{
		"snapshot_sandbox": "/v1/sandboxes/" + sb.ID + "/snapshots",
		"fork_sandbox":     "/v1/sandboxes/" + sb.ID + "/fork",
	} {
		t.Run(tool, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"sandbox_id": sb.ID}}
			p.SetProgressToken(tool)
			errc := make(chan error, 1)
			go func() {
				_, err := s.cs.CallTool(ctx, p)
				errc <- err
			}()
			select {
			case got := <-proxy.held:
				if got != "POST "+path {
					t.Fatalf("held %s, want POST %s", got, path)
				}
			case <-time.After(time.Minute):
				t.Fatalf("%s never called POST %s", tool, path)
			}
			// In flight, and still so a moment later (with progress).
			started := func(m []string) bool { return len(m) > 0 && strings.HasSuffix(m[0], ": started") }
			if m := s.progress.until(tool, started); !started(m) {
				t.Errorf("no progress while %s runs: %q", tool, m)
			}
			select {
			case got := <-proxy.cancelled:
				t.Fatalf("%s ended before the cancel", got)
			case <-time.After(300 * time.Millisecond):
			}
			cancel()
			select {
			case got := <-proxy.cancelled:
				if got != "POST "+path {
					t.Errorf("cancelled %s, want POST %s", got, path)
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("POST %s still runs 15 s after the MCP call was cancelled", path)
			}
			if err := <-errc; err == nil {
				t.Error("the cancelled call returned no error")
			}
		})
	}
	ctx := context.Background()
	if snaps, err := api().Sandboxes.ListSnapshots(ctx, sb.ID); err != nil || len(snaps) != 0 {
		t.Errorf("after the cancelled calls %s has snapshots %+v, %v", sb.ID, snaps, err)
	}
	if kids, err := api().Sandboxes.Children(ctx, sb.ID); err != nil || len(kids) != 0 {
		t.Errorf("after the cancelled calls %s has copies %+v, %v", sb.ID, kids, err)
	}
}
