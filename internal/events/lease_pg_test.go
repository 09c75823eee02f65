package events

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/pgtest"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestWebhookDispatchOnceAcrossProcesses: two dispatchers on two
// connections to one PostgreSQL store (two ptd processes) deliver each
// event once, not once each; when the holder of the dispatch lease dies
// without releasing it, the other delivers once the lease expires.
func TestWebhookDispatchOnceAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	open := func(holder string) (*Service, store.Store) {
		st, err := postgres.Open(ctx, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.PollInterval, cfg.AllowPrivate, cfg.RetryBase = 20*time.Millisecond, true, 10*time.Millisecond
		cfg.LeaseTTL, cfg.Holder = time.Second, holder
		feed := &Feed{}
		s := New(cfg, feed.Wrap(st), feed, slog.New(slog.NewTextHandler(io.Discard, nil)))
		t.Cleanup(func() { s.Close(); st.Close() })
		return s, st
	}
	a, _ := open("api_a")
	b, stB := open("api_b")
	rcv := &receiver{got: make(chan struct{}, 100)}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	wh, err := a.CreateWebhook(ctx, org, WebhookRequest{URL: srv.URL, Events: []string{"hello"}})
	if err != nil {
		t.Fatal(err)
	}
	a.Run(ctx)
	b.Run(ctx)
	const n = 10
	for range n {
		if err := stB.AddEvent(ctx, "org_a", "sbx_1", "hello", nil); err != nil {
			t.Fatal(err)
		}
	}
	delivered := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			ds, _ := a.WebhookDeliveries(ctx, org, wh.ID, 0)
			done := 0
			for _, d := range ds {
				if d.Status == store.DeliveryDelivered {
					done++
				}
			}
			if done >= want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d deliveries done", done, want)
			}
		}
	}
	delivered(n)
	time.Sleep(300 * time.Millisecond) // room for a duplicate send to arrive
	rcv.mu.Lock()
	got := len(rcv.bodies)
	rcv.mu.Unlock()
	if got != n {
		t.Fatalf("the receiver got %d requests for %d events, want each once", got, n)
	}

	// Both stop; a holder that dies keeps the lease until it expires, then
	// a new dispatcher takes over and delivers what is pending.
	a.Close()
	b.Close()
	c, stC := open("api_c")
	dead, held, err := stC.AcquireLease(ctx, LeaseWebhooks, "api_dead", time.Second)
	if err != nil || !held {
		t.Fatalf("the dead holder's lease: %v %v", held, err)
	}
	c.Run(ctx)
	if err := stC.AddEvent(ctx, "org_a", "sbx_1", "hello", nil); err != nil {
		t.Fatal(err)
	}
	delivered(n + 1)
	rcv.mu.Lock()
	last := rcv.at[len(rcv.at)-1]
	rcv.mu.Unlock()
	if last.Before(dead.ExpiresAt) {
		t.Fatalf("delivered at %v, before the dead holder's lease expired at %v", last, dead.ExpiresAt)
	}
	l, held, _ := stC.AcquireLease(ctx, LeaseWebhooks, "probe", time.Second)
	if held || l.Holder != "api_c" || l.Generation <= dead.Generation {
		t.Fatalf("lease after the takeover = %+v, want api_c's at a later generation than %d", l, dead.Generation)
	}
}
