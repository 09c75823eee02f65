package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/platinum-dev/platinum/internal/events"
	"github.com/platinum-dev/platinum/internal/hostjoin"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/remote"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
)

// TestServeHosts: the API listener hands /_pt/join and /_pt/store/ to the
// joining hosts' handlers, which want the host token, and the rest to the
// API; a host's commit through the store wakes the platform's own feed.
func TestServeHosts(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "pt.db"), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	feed := &events.Feed{}
	token := "0123456789abcdef0123456789abcdef"
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "api") })
	srv := httptest.NewServer(serveHosts(api, hostjoin.Info{Region: "eu", SecretsKey: []byte("k")}, feed.Wrap(st), feed, token, log))
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{hostjoin.Path, token, http.StatusOK},
		{hostjoin.Path, "", http.StatusUnauthorized},
		{remote.Prefix, "wrong", http.StatusUnauthorized},
		{"/v1/sandboxes", "", http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || (tc.path == "/v1/sandboxes") != (string(b) == "api") {
			t.Fatalf("GET %s with %q: %d %q, want %d", tc.path, tc.token, resp.StatusCode, b, tc.want)
		}
	}
	info, err := hostjoin.Fetch(ctx, srv.URL, token, log)
	if err != nil || info.Region != "eu" {
		t.Fatalf("join: %+v %v", info, err)
	}
	c, err := remote.Dial(ctx, srv.URL, token, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	wake := feed.Wake()
	if err := c.CreateOrg(ctx, store.Org{ID: "org_h", Name: "h"}); err != nil {
		t.Fatal(err)
	}
	if err := c.AddEvent(ctx, "org_h", "sbx_x", "test", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	default:
		t.Fatal("a host's event through the store did not wake the platform's feed")
	}
	if o, err := st.GetOrg(ctx, "org_h"); err != nil || o.Name != "h" {
		t.Fatalf("the host's write in the platform's store: %+v %v", o, err)
	}
}
