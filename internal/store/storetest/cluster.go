package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// sameJSON reports whether two documents hold the same value (stores may
// keep or normalise the text).
func sameJSON(t *testing.T, got, want json.RawMessage) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("stored document %q: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("document %q: %v", want, err)
	}
	return cmp.Equal(g, w)
}

func testHosts(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := s.GetHost(ctx, "host_missing"); !store.IsNotFound(err) {
		t.Fatalf("GetHost of an unknown host: %v, want ErrNotFound", err)
	}
	if _, err := s.HeartbeatHost(ctx, "host_missing", 1, nil); !store.IsNotFound(err) {
		t.Fatalf("HeartbeatHost of an unknown host: %v, want ErrNotFound", err)
	}
	capacity := json.RawMessage(`{"cpu": 8, "ram_mb": 16384, "classes": ["runc"]}`)
	before := time.Now().Add(-time.Second)
	h, err := s.RegisterHost(ctx, store.HostRecord{ID: "host_b", Region: "eu", URL: "http://10.0.0.2:7072", Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	if h.Generation != 1 || h.State != store.HostActive || h.URL != "http://10.0.0.2:7072" || h.Region != "eu" {
		t.Fatalf("new host = %+v, want generation 1, active, its URL and region", h)
	}
	if !sameJSON(t, h.Capacity, capacity) || !sameJSON(t, h.Status, json.RawMessage(`{}`)) {
		t.Fatalf("capacity %s, status %s", h.Capacity, h.Status)
	}
	if h.HeartbeatAt.Before(before) || h.RegisteredAt.Before(before) || h.HeartbeatAt.Location() != time.UTC {
		t.Fatalf("times: registered %v heartbeat %v", h.RegisteredAt, h.HeartbeatAt)
	}
	if _, err := s.RegisterHost(ctx, store.HostRecord{ID: "host_a", URL: "http://10.0.0.1:7072"}); err != nil {
		t.Fatal(err)
	}

	status := json.RawMessage(`{"sandboxes": {"sbx_1": "running"}}`)
	hb, err := s.HeartbeatHost(ctx, "host_b", 1, status)
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, hb.Status, status) || hb.HeartbeatAt.Before(h.HeartbeatAt) {
		t.Fatalf("heartbeat stored status %s at %v", hb.Status, hb.HeartbeatAt)
	}
	wantErr(t, "heartbeat of another generation", func() error { _, err := s.HeartbeatHost(ctx, "host_b", 2, status); return err }(), store.ErrConflict)

	// Registering again is a new generation; a drain outlives it.
	h2, err := s.RegisterHost(ctx, store.HostRecord{ID: "host_b", Region: "eu", URL: "http://10.0.0.2:7073", Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	if h2.Generation != 2 || h2.URL != "http://10.0.0.2:7073" || h2.State != store.HostActive {
		t.Fatalf("re-registered host = %+v, want generation 2 with its new URL", h2)
	}
	wantErr(t, "heartbeat of the old generation", func() error { _, err := s.HeartbeatHost(ctx, "host_b", 1, status); return err }(), store.ErrConflict)
	d, err := s.SetHostState(ctx, "host_b", 0, store.HostDraining, "maintenance")
	if err != nil {
		t.Fatal(err)
	}
	if d.State != store.HostDraining || d.Reason != "maintenance" || d.Generation != 2 {
		t.Fatalf("drained host = %+v", d)
	}
	h3, err := s.RegisterHost(ctx, store.HostRecord{ID: "host_b", URL: "http://10.0.0.2:7073", Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	if h3.State != store.HostDraining || h3.Reason != "maintenance" || h3.Generation != 3 {
		t.Fatalf("a draining host registering again = %+v, want still draining at generation 3", h3)
	}
	if _, err := s.SetHostState(ctx, "host_b", 0, store.HostActive, ""); err != nil {
		t.Fatal(err)
	}

	// Lost names the generation it ends.
	wantErr(t, "mark lost an older generation", func() error {
		_, err := s.SetHostState(ctx, "host_b", 2, store.HostLost, "no heartbeat")
		return err
	}(), store.ErrConflict)
	lost, err := s.SetHostState(ctx, "host_b", 3, store.HostLost, "no heartbeat")
	if err != nil {
		t.Fatal(err)
	}
	if lost.State != store.HostLost || lost.StateChangedAt.Before(h3.StateChangedAt) {
		t.Fatalf("lost host = %+v", lost)
	}
	wantErr(t, "heartbeat of a lost host", func() error { _, err := s.HeartbeatHost(ctx, "host_b", 3, status); return err }(), store.ErrConflict)
	wantErr(t, "undrain a lost host", func() error { _, err := s.SetHostState(ctx, "host_b", 0, store.HostActive, ""); return err }(), store.ErrConflict)
	back, err := s.RegisterHost(ctx, store.HostRecord{ID: "host_b", URL: "http://10.0.0.2:7073", Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	if back.State != store.HostActive || back.Generation != 4 || back.Reason != "" {
		t.Fatalf("a lost host registering again = %+v, want active at generation 4", back)
	}
	wantErr(t, "set state of an unknown host", func() error { _, err := s.SetHostState(ctx, "host_x", 0, store.HostDraining, ""); return err }(), store.ErrNotFound)

	all, err := s.ListHosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range all {
		got = append(got, fmt.Sprintf("%s/%d", h.ID, h.Generation))
	}
	if diff := cmp.Diff([]string{"host_a/1", "host_b/4"}, got); diff != "" {
		t.Fatalf("ListHosts (-want +got):\n%s", diff)
	}
	one, err := s.GetHost(ctx, "host_b")
	if err != nil || one.Generation != 4 || !sameJSON(t, one.Capacity, capacity) {
		t.Fatalf("GetHost = %+v, %v", one, err)
	}
}

func testHostUsage(t *testing.T, s store.Store) {
	ctx := t.Context()
	mk := func(host string, st sandbox.State, cpu float64, ram, disk int) {
		sb := newSandbox("org_a", base)
		sb.Name, sb.HostID, sb.CPU, sb.RAMMB, sb.DiskGB = "", host, cpu, ram, disk
		mustCreate(t, s, sb)
		if st != sandbox.StateCreating {
			cur, err := s.GetSandbox(ctx, "", sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			cur.State = st
			if _, err := s.UpdateSandbox(ctx, cur); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("host_a", sandbox.StateRunning, 2, 1024, 10)
	mk("host_a", sandbox.StateCreating, 1, 512, 5)
	mk("host_a", sandbox.StateStopped, 4, 4096, 20)
	mk("host_b", sandbox.StateRunning, 0.5, 256, 2)
	u, err := s.HostUsage(ctx, sandbox.StateCreating, sandbox.StateRunning)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.Usage{
		"host_a": {Sandboxes: 2, CPU: 3, RAMMB: 1536, DiskGB: 15},
		"host_b": {Sandboxes: 1, CPU: 0.5, RAMMB: 256, DiskGB: 2},
	}
	if diff := cmp.Diff(want, u); diff != "" {
		t.Fatalf("HostUsage (-want +got):\n%s", diff)
	}
	rows, total, err := s.ListSandboxes(ctx, store.ListOptions{HostID: "host_a"})
	if err != nil || total != 3 || len(rows) != 3 {
		t.Fatalf("ListSandboxes(HostID) = %d rows, total %d, %v; want 3", len(rows), total, err)
	}
	for _, r := range rows {
		if r.HostID != "host_a" {
			t.Fatalf("ListSandboxes(HostID host_a) returned a sandbox of %s", r.HostID)
		}
	}
	if u, err := s.HostUsage(ctx); err != nil || len(u) != 0 {
		t.Fatalf("HostUsage() = %v, %v; want empty", u, err)
	}
}

func testLeases(t *testing.T, s store.Store) {
	ctx := t.Context()
	l, held, err := s.AcquireLease(ctx, "loop/timers", "api_a", time.Minute)
	if err != nil || !held {
		t.Fatalf("AcquireLease of a free lease = %v, %v", held, err)
	}
	if l.Holder != "api_a" || l.Generation != 1 || time.Until(l.ExpiresAt) < 50*time.Second {
		t.Fatalf("lease = %+v", l)
	}
	l2, held, err := s.AcquireLease(ctx, "loop/timers", "api_b", time.Minute)
	if err != nil || held {
		t.Fatalf("AcquireLease of a lease another holds = %v, %v; want not held", held, err)
	}
	if l2.Holder != "api_a" || l2.Generation != 1 {
		t.Fatalf("a refused acquire reports %+v, want the holder api_a at generation 1", l2)
	}
	renewed, held, err := s.AcquireLease(ctx, "loop/timers", "api_a", 2*time.Minute)
	if err != nil || !held || renewed.Generation != 1 || !renewed.ExpiresAt.After(l.ExpiresAt) {
		t.Fatalf("renewal = %+v, %v, %v; want the same generation, a later expiry", renewed, held, err)
	}

	// An expired lease changes hands and moves its generation; the old
	// holder cannot renew it.
	if _, held, err := s.AcquireLease(ctx, "loop/short", "api_a", 50*time.Millisecond); err != nil || !held {
		t.Fatalf("acquire: %v %v", held, err)
	}
	time.Sleep(120 * time.Millisecond)
	taken, held, err := s.AcquireLease(ctx, "loop/short", "api_b", time.Minute)
	if err != nil || !held || taken.Holder != "api_b" || taken.Generation != 2 {
		t.Fatalf("takeover of an expired lease = %+v, %v, %v; want api_b at generation 2", taken, held, err)
	}
	if _, held, err := s.AcquireLease(ctx, "loop/short", "api_a", time.Minute); err != nil || held {
		t.Fatalf("the old holder renewing = %v, %v; want refused", held, err)
	}
	// A release frees it at once; releasing another's lease does nothing.
	if err := s.ReleaseLease(ctx, "loop/short", "api_a"); err != nil {
		t.Fatal(err)
	}
	if _, held, _ := s.AcquireLease(ctx, "loop/short", "api_c", time.Minute); held {
		t.Fatal("a release by a non-holder freed the lease")
	}
	if err := s.ReleaseLease(ctx, "loop/short", "api_b"); err != nil {
		t.Fatal(err)
	}
	again, held, err := s.AcquireLease(ctx, "loop/short", "api_c", time.Minute)
	if err != nil || !held || again.Generation != 3 {
		t.Fatalf("acquire after a release = %+v, %v, %v; want api_c at generation 3", again, held, err)
	}
	// The same holder taking its own lease again after it lapsed is a new
	// term too: what it did before may have been undone meanwhile.
	if _, _, err := s.AcquireLease(ctx, "loop/lapse", "api_a", 30*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(80 * time.Millisecond)
	if l, held, err := s.AcquireLease(ctx, "loop/lapse", "api_a", time.Minute); err != nil || !held || l.Generation != 2 {
		t.Fatalf("re-acquire after a lapse = %+v, %v, %v; want generation 2", l, held, err)
	}

	if _, _, err := s.AcquireLease(ctx, "api/api_a", "api_a", time.Minute); err != nil {
		t.Fatal(err)
	}
	ls, err := s.ListLeases(ctx, "loop/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range ls {
		names = append(names, l.Name+"="+l.Holder)
	}
	if diff := cmp.Diff([]string{"loop/lapse=api_a", "loop/short=api_c", "loop/timers=api_a"}, names); diff != "" {
		t.Fatalf("ListLeases(loop/) (-want +got):\n%s", diff)
	}
}

// testConcurrentLeases races holders for one free lease: exactly one wins.
func testConcurrentLeases(t *testing.T, s store.Store) {
	ctx := t.Context()
	for round := range 5 {
		name := fmt.Sprintf("loop/race-%d", round)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, held, err := s.AcquireLease(ctx, name, fmt.Sprintf("api_%d", i), time.Minute)
				if err != nil {
					t.Error(err)
				}
				if held {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d holders of one lease", round, n)
		}
	}
}

// testLockKey checks LockKey excludes holders of one key, not of others,
// and that a wait ends with its context.
func testLockKey(t *testing.T, s store.Store) {
	ctx := t.Context()
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				unlock, err := s.LockKey(ctx, "quota/org_a")
				if err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				if n > most.Load() {
					most.Store(n)
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				unlock()
			}
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d holders of one key at once", most.Load())
	}

	unlock, err := s.LockKey(ctx, "quota/org_a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.LockKey(ctx, "quota/org_b")
	if err != nil {
		t.Fatalf("another key waited for a held one: %v", err)
	}
	other()
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := s.LockKey(wctx, "quota/org_a"); err == nil {
		t.Fatal("LockKey of a held key returned before its holder unlocked")
	}
	unlock()
	again, err := s.LockKey(ctx, "quota/org_a")
	if err != nil {
		t.Fatalf("LockKey after the unlock (and a wait that gave up): %v", err)
	}
	again()
}

// testKeyFingerprints checks the platform's key fingerprints: the first
// record of a name stays, a later one with another fingerprint reads back
// the first, and racing first records agree on one.
func testKeyFingerprints(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := s.GetKeyFingerprint(ctx, "secrets.key"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetKeyFingerprint of nothing recorded: %v, want ErrNotFound", err)
	}
	first := store.KeyFingerprint{Name: "secrets.key", Fingerprint: "fp-a", Origin: "/var/lib/platinum on machine-a"}
	got, err := s.RecordKeyFingerprint(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if got.CreatedAt.IsZero() || time.Since(got.CreatedAt) > time.Minute {
		t.Errorf("CreatedAt = %v, want now", got.CreatedAt)
	}
	first.CreatedAt = got.CreatedAt
	if diff := cmp.Diff(first, got); diff != "" {
		t.Fatalf("RecordKeyFingerprint (-want +got):\n%s", diff)
	}
	again, err := s.RecordKeyFingerprint(ctx, store.KeyFingerprint{Name: "secrets.key", Fingerprint: "fp-b", Origin: "/data on machine-b"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Fatalf("a second record replaced the first (-want +got):\n%s", diff)
	}
	if read, err := s.GetKeyFingerprint(ctx, "secrets.key"); err != nil || !cmp.Equal(read, first) {
		t.Fatalf("GetKeyFingerprint = %+v, %v; want %+v", read, err, first)
	}
	if _, err := s.GetKeyFingerprint(ctx, "preview.key"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another name: %v, want ErrNotFound", err)
	}
	if _, err := s.RecordKeyFingerprint(ctx, store.KeyFingerprint{Name: "preview.key"}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("an empty fingerprint: %v, want ErrInvalidArgument", err)
	}
	// Racing first records: every caller reads back the same winner.
	var wg sync.WaitGroup
	got8 := make([]store.KeyFingerprint, 8)
	for i := range got8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := s.RecordKeyFingerprint(ctx, store.KeyFingerprint{Name: "preview.key", Fingerprint: fmt.Sprintf("fp-%d", i), Origin: fmt.Sprintf("m%d:/d", i)})
			if err != nil {
				t.Error(err)
			}
			got8[i] = f
		}()
	}
	wg.Wait()
	for i, f := range got8 {
		if !cmp.Equal(f, got8[0]) || f.Fingerprint == "" {
			t.Fatalf("racing records read back %+v and %+v (#%d)", got8[0], f, i)
		}
	}
}
