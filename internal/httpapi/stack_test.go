package httpapi

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/events"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// newEventsStack builds the API the way the event tests and the read
// benchmark need it and serveLogged hides it: over a fresh SQLite store
// they can write to directly (to add or prune events), with the control
// plane on host h, the event feed, and token "tok" bootstrapped. Cleanup
// closes the events service, then the control plane, then the store — after
// a server registered later (serveAPI) has closed.
func newEventsStack(tb testing.TB, h controlplane.Host, log *slog.Logger) (*sqlite.Store, *controlplane.Service, *API) {
	tb.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "db"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	feed := &events.Feed{}
	fst := feed.Wrap(st) // every part's commits wake event readers
	tn := tenancy.New(tenancy.DefaultConfig(), fst, log)
	cp := controlplane.New(controlplane.DefaultConfig(), fst, h, tn, log)
	ev := events.New(events.DefaultConfig(), fst, feed, log)
	tb.Cleanup(cp.Close)
	tb.Cleanup(ev.Close)
	if _, err := tn.Bootstrap(context.Background(), "tok"); err != nil {
		tb.Fatal(err)
	}
	return st, cp, New(Deps{Sandboxes: cp, Tenancy: tn, Events: ev}, log)
}
