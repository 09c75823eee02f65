// Package regiontest puts in-process regions behind a real region router,
// for tests of a surface's lists merged across regions
// (docs/ARCHITECTURE.md, "Regions").
package regiontest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/platinum-dev/platinum/internal/region"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Peers serves each handler as a region of its own, named r1, r2, … in
// order, on a loopback server closed when the test ends.
func Peers(t testing.TB, hs ...http.Handler) []region.Peer {
	t.Helper()
	peers := make([]region.Peer, len(hs))
	for i, h := range hs {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		u, _ := url.Parse(srv.URL)
		peers[i] = region.Peer{Name: fmt.Sprint("r", i+1), URL: u}
	}
	return peers
}

// Router is region self answered by local, joined to peers, merging
// lists. No region has a sandbox to look up by ID.
func Router(self string, local http.Handler, peers []region.Peer, lists ...region.List) http.Handler {
	rt := region.New(self, peers, noStore{}, slog.New(slog.DiscardHandler))
	rt.AddLists(lists...)
	return rt.Wrap(local)
}

// noStore is a region store with no sandboxes.
type noStore struct{}

func (noStore) GetSandbox(context.Context, string, string) (sandbox.Sandbox, error) {
	return sandbox.Sandbox{}, sandbox.ErrNotFound
}
