package hostreg

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/pgtest"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/postgres"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// stores opens n stores on one database of each kind: n connections to
// one PostgreSQL database, as n ptd processes have them, and one SQLite
// store shared n ways (the embedded default is one process).
func stores(t *testing.T, n int) map[string][]store.Store {
	ctx := t.Context()
	sq, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "pt.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	url := pgtest.NewDatabase(t)
	out := map[string][]store.Store{}
	for range n {
		out["sqlite"] = append(out["sqlite"], sq)
		pg, err := postgres.Open(ctx, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pg.Close() })
		out["postgres"] = append(out["postgres"], pg)
	}
	return out
}

// TestHostLiveness: two hosts register with their capacity and heartbeat
// their load; two watchers (two api processes) race to check liveness; a
// host that stops heartbeating is marked lost once, by one of them, after
// the bound, the other stays active; the lost host's next heartbeat is
// refused and it registers again under a new generation.
func TestHostLiveness(t *testing.T) {
	for kind, ss := range stores(t, 2) {
		t.Run(kind, func(t *testing.T) {
			ctx := t.Context()
			info := hostapi.HostInfo{ID: "host_a", Classes: []hostapi.ClassInfo{{Name: "runc", StopKeepsMemory: "freeze"},
				{Name: "runsc", Checkpoint: true, StopKeepsMemory: "checkpoint"}}}
			regs := map[string]*Registrar{}
			for i, id := range []string{"host_a", "host_b"} {
				regs[id] = &Registrar{Store: ss[i], Host: store.HostRecord{ID: id, URL: "http://127.0.0.1:" + id},
					Capacity: CapacityOf(info, Resources{CPU: 4, RAMMB: 8192, DiskGB: 50}),
					Status:   StatusFrom(ss[i], id), Interval: time.Hour, Log: slog.Default()}
				if _, err := regs[id].Register(ctx); err != nil {
					t.Fatal(err)
				}
			}
			sb := sandbox.Sandbox{ID: "sbx_" + kind, OrgID: "org_a", Template: "busybox", State: sandbox.StateRunning,
				HostID: "host_a", CPU: 2, RAMMB: 1024, DiskGB: 5, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
			if err := ss[0].CreateSandbox(ctx, sb); err != nil {
				t.Fatal(err)
			}
			rec, err := regs["host_a"].Heartbeat(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var st Status
			if err := json.Unmarshal(rec.Status, &st); err != nil {
				t.Fatal(err)
			}
			if st.Sandboxes["running"] != 1 || st.CPU != 2 || st.RAMMB != 1024 || st.DiskGB != 5 {
				t.Fatalf("heartbeat status = %+v, want host_a's one running sandbox", st)
			}
			var c Capacity
			if err := json.Unmarshal(rec.Capacity, &c); err != nil {
				t.Fatal(err)
			}
			if c.CPU != 4 || c.RAMMB != 8192 || len(c.Classes) != 2 || !c.Classes[1].Checkpoint || c.Classes[1].Name != "runsc" {
				t.Fatalf("registered capacity = %+v", c)
			}

			const lostAfter = time.Second
			var mu sync.Mutex
			var marked, settled []string
			watchers := make([]*Watcher, 2)
			for i := range watchers {
				watchers[i] = &Watcher{Store: ss[i], Holder: []string{"api_1", "api_2"}[i], LostAfter: lostAfter,
					Interval: time.Minute, Log: slog.Default(), Lost: func(_ context.Context, h store.HostRecord) {
						mu.Lock()
						settled = append(settled, h.ID)
						mu.Unlock()
					}}
			}
			check := func() {
				var wg sync.WaitGroup
				for _, w := range watchers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						lost, err := w.Check(ctx)
						if err != nil {
							t.Error(err)
						}
						mu.Lock()
						for _, h := range lost {
							marked = append(marked, h.ID)
						}
						mu.Unlock()
					}()
				}
				wg.Wait()
			}
			check()
			if len(marked) != 0 {
				t.Fatalf("fresh hosts marked lost: %v", marked)
			}
			// host_a keeps heartbeating, host_b goes quiet.
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := regs["host_a"].Heartbeat(ctx); err != nil {
					t.Fatal(err)
				}
				check()
				mu.Lock()
				n := len(marked)
				mu.Unlock()
				if n > 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if len(marked) != 1 || marked[0] != "host_b" {
				t.Fatalf("marked lost: %v, want host_b once", marked)
			}
			b, err := ss[0].GetHost(ctx, "host_b")
			if err != nil || b.State != store.HostLost || b.Reason == "" {
				t.Fatalf("host_b = %+v, %v; want lost with a reason", b, err)
			}
			if a, _ := ss[0].GetHost(ctx, "host_a"); a.State != store.HostActive {
				t.Fatalf("host_a, heartbeating, is %s", a.State)
			}
			check() // a lost host is not marked again, but what it left is settled again
			if len(marked) != 1 {
				t.Fatalf("marked lost: %v, want host_b once", marked)
			}
			if len(settled) != 2 || settled[0] != "host_b" || settled[1] != "host_b" {
				t.Fatalf("Lost called for %v, want host_b at each of two passes", settled)
			}
			back, err := regs["host_b"].Heartbeat(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if back.State != store.HostActive || back.Generation != 2 {
				t.Fatalf("host_b after it came back = %+v, want active at generation 2", back)
			}
		})
	}
}

// TestWatcherLeaseMoves: the watcher whose process dies (it stops
// renewing) hands the duty to the other once its lease expires.
func TestWatcherLeaseMoves(t *testing.T) {
	ss := stores(t, 2)["postgres"]
	ctx := t.Context()
	w1 := &Watcher{Store: ss[0], Holder: "api_1", LostAfter: time.Hour, Interval: 100 * time.Millisecond, Log: slog.Default()}
	w2 := &Watcher{Store: ss[1], Holder: "api_2", LostAfter: time.Hour, Interval: 100 * time.Millisecond, Log: slog.Default()}
	if _, err := w1.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w2.Check(ctx); err != nil {
		t.Fatal(err)
	}
	l, held, err := ss[1].AcquireLease(ctx, LeaseLiveness, "probe", time.Second)
	if err != nil || held || l.Holder != "api_1" {
		t.Fatalf("lease = %+v held by probe %v, %v; want api_1's", l, held, err)
	}
	// api_1 stops; within its TTL (3 intervals) api_2 takes over.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := w2.Check(ctx); err != nil {
			t.Fatal(err)
		}
		l, _, _ := ss[1].AcquireLease(ctx, LeaseLiveness, "probe", time.Second)
		if l.Holder == "api_2" {
			if l.Generation != 2 {
				t.Fatalf("taken-over lease generation %d, want 2", l.Generation)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("api_2 never took the lease over: %+v", l)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWatcherDefersToHosts: an api-only ptd's watcher (DeferToHosts) takes
// no lease while a host lives, so a host's watcher (which can recover a
// lost host's sandboxes) acts; once no host is alive it marks the last
// one lost, and when a host is back it gives the lease up.
func TestWatcherDefersToHosts(t *testing.T) {
	for kind, ss := range stores(t, 1) {
		t.Run(kind, func(t *testing.T) {
			st, ctx := ss[0], t.Context()
			reg := &Registrar{Store: st, Host: store.HostRecord{ID: "host_a", URL: "http://127.0.0.1:1"},
				Status: StatusFrom(st, "host_a"), Interval: time.Hour, Log: slog.Default()}
			if _, err := reg.Register(ctx); err != nil {
				t.Fatal(err)
			}
			var lost []string
			w := &Watcher{Store: st, Holder: "api_1", Self: "api_1", LostAfter: 300 * time.Millisecond, Interval: time.Minute,
				Log: slog.Default(), DeferToHosts: true, Lost: func(_ context.Context, h store.HostRecord) { lost = append(lost, h.ID) }}
			holder := func() string {
				l, _, _ := st.AcquireLease(ctx, LeaseLiveness, "probe", time.Millisecond)
				st.ReleaseLease(ctx, LeaseLiveness, "probe")
				return l.Holder
			}
			if _, err := w.Check(ctx); err != nil || holder() == "api_1" {
				t.Fatalf("with host_a alive the api's watcher took the lease (%v)", err)
			}
			time.Sleep(400 * time.Millisecond) // host_a stops heartbeating
			marked, err := w.Check(ctx)
			if err != nil || len(marked) != 1 || marked[0].ID != "host_a" || len(lost) != 1 {
				t.Fatalf("with no host alive: marked %+v, Lost %v, %v; want host_a once", marked, lost, err)
			}
			if _, err := reg.Register(ctx); err != nil { // back, next generation
				t.Fatal(err)
			}
			if _, err := w.Check(ctx); err != nil || holder() != "probe" {
				t.Fatalf("with host_a back the api's watcher kept the lease (%v)", err)
			}
		})
	}
}

// cutOff is a store whose heartbeats fail while cut is set, as a host's
// do when it cannot reach the store.
type cutOff struct {
	store.Store
	mu  sync.Mutex
	cut bool
}

func (c *cutOff) set(cut bool) {
	c.mu.Lock()
	c.cut = cut
	c.mu.Unlock()
}

func (c *cutOff) HeartbeatHost(ctx context.Context, id string, gen int64, status json.RawMessage) (store.HostRecord, error) {
	c.mu.Lock()
	cut := c.cut
	c.mu.Unlock()
	if cut {
		return store.HostRecord{}, errors.New("connection refused")
	}
	return c.Store.HeartbeatHost(ctx, id, gen, status)
}

// TestFenceWhileCutOff: a host whose heartbeats fail is fenced once they
// have failed for FenceAfter (not at the first failure, and once only),
// and unfenced once at the first heartbeat that gets through again; a
// host alone on the store is never fenced.
func TestFenceWhileCutOff(t *testing.T) {
	for kind, ss := range stores(t, 1) {
		t.Run(kind, func(t *testing.T) {
			st := &cutOff{Store: ss[0]}
			var mu sync.Mutex
			var calls []string
			var cutAt time.Time
			var fencedAfter time.Duration
			note := func(what string) func(context.Context) {
				return func(context.Context) {
					mu.Lock()
					defer mu.Unlock()
					if what == "fence" {
						fencedAfter = time.Since(cutAt)
					}
					calls = append(calls, what)
				}
			}
			r := &Registrar{Store: st, Host: store.HostRecord{ID: "host_f", URL: "http://127.0.0.1:1"},
				Interval: 20 * time.Millisecond, Log: slog.New(slog.DiscardHandler),
				FenceAfter: 200 * time.Millisecond, Fence: note("fence"), Unfence: note("unfence")}
			if _, err := r.Register(t.Context()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); r.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			got := func() []string {
				mu.Lock()
				defer mu.Unlock()
				return slices.Clone(calls)
			}
			waitCalls := func(want ...string) {
				t.Helper()
				for deadline := time.Now().Add(5 * time.Second); !slices.Equal(got(), want); time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("calls = %v, want %v", got(), want)
					}
				}
			}
			// Alone on the store, nobody could recover its sandboxes: a
			// store out of reach fences nothing.
			time.Sleep(100 * time.Millisecond)
			st.set(true)
			time.Sleep(500 * time.Millisecond)
			if len(got()) != 0 {
				t.Fatalf("a host alone on the store was fenced: %v", got())
			}
			st.set(false)
			// With another host registered, it is.
			if _, err := st.RegisterHost(t.Context(), store.HostRecord{ID: "host_g", URL: "http://127.0.0.1:2"}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			cutAt = time.Now()
			mu.Unlock()
			st.set(true)
			waitCalls("fence")
			// The last heartbeat that got through may be up to one
			// Interval before the cut.
			if fencedAfter < 200*time.Millisecond-20*time.Millisecond {
				t.Fatalf("fenced %s after the store went away, want about FenceAfter (200ms)", fencedAfter)
			}
			time.Sleep(200 * time.Millisecond) // still cut off: no second fence
			waitCalls("fence")
			st.set(false)
			waitCalls("fence", "unfence")
			time.Sleep(100 * time.Millisecond)
			waitCalls("fence", "unfence")
		})
	}
}
