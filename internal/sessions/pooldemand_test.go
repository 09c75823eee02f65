package sessions

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// withClock gives s's demand record a clock the test moves.
func withClock(s *Service) *fakeClock {
	c := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s.pools.demand.now = c.now
	return c
}

func TestPeakClaims(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(secs ...int) []time.Time {
		var out []time.Time
		for _, s := range secs {
			out = append(out, t0.Add(time.Duration(s)*time.Second))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		claims []time.Time
		span   time.Duration
		want   int
	}{
		{"none", nil, 10 * time.Second, 0},
		{"one", at(0), 10 * time.Second, 1},
		{"a burst", at(0, 1, 2, 3), 10 * time.Second, 4},
		{"spread wider than a refill", at(0, 20, 40, 60), 10 * time.Second, 1},
		{"the densest stretch counts", at(0, 30, 31, 32, 60), 10 * time.Second, 3},
		{"the span is half-open", at(0, 10), 10 * time.Second, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := peakClaims(tc.claims, tc.span); got != tc.want {
				t.Errorf("peakClaims = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestCutTargets: a memory budget lowers targets one sandbox at a time
// from the pool holding the most memory, demand-driven sandboxes (above
// min_ready) before any min_ready; 0 is no budget.
func TestCutTargets(t *testing.T) {
	a, b, c := poolID{template: "a"}, poolID{template: "b"}, poolID{template: "c"}
	ram := map[poolID]int{a: 512, b: 1024, c: 256}
	for _, tc := range []struct {
		name    string
		budget  int
		targets map[poolID]int
		floors  map[poolID]int
		want    map[poolID]int
	}{
		{"no budget", 0, map[poolID]int{a: 8, b: 8}, map[poolID]int{}, map[poolID]int{a: 8, b: 8}},
		{"within budget", 4096, map[poolID]int{a: 4, b: 2}, map[poolID]int{}, map[poolID]int{a: 4, b: 2}},
		{"largest first", 3072, map[poolID]int{a: 4, b: 2}, map[poolID]int{}, map[poolID]int{a: 3, b: 1}},
		{"shared out", 2048, map[poolID]int{a: 4, b: 4}, map[poolID]int{}, map[poolID]int{a: 2, b: 1}},
		{"extras before min_ready", 2048, map[poolID]int{a: 4, b: 2, c: 0}, map[poolID]int{b: 2}, map[poolID]int{a: 0, b: 2, c: 0}},
		{"min_ready too when it alone is over", 1024, map[poolID]int{a: 1, b: 2}, map[poolID]int{a: 1, b: 2}, map[poolID]int{a: 1, b: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			targets := map[poolID]poolTarget{}
			for id, n := range tc.targets {
				targets[id] = poolTarget{Target: n}
			}
			cutTargets(targets, tc.floors, ram, tc.budget)
			got, total := map[poolID]int{}, 0
			for id, pt := range targets {
				got[id] = pt.Target
				total += pt.Target * ram[id]
				if pt.Cut != (pt.Target < tc.targets[id]) {
					t.Errorf("%s: cut %v with target %d of %d", id.template, pt.Cut, pt.Target, tc.targets[id])
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(poolID{})); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
			if tc.budget > 0 && total > tc.budget {
				t.Errorf("targets hold %d MB, over the %d MB budget", total, tc.budget)
			}
		})
	}
}

// poolRow is a pool as the tests compare it.
func poolRow(ps PoolStatus) string {
	return fmt.Sprintf("%s/%s auto=%v target=%d demand=%d", ps.Template, ps.Runtime, ps.Auto, ps.Target, ps.Demand)
}

func listRows(t *testing.T, s *Service) []string {
	t.Helper()
	all, err := s.Pools(context.Background(), Principal{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ps := range all {
		out = append(out, poolRow(ps))
	}
	return out
}

// TestAutoPoolTarget: an auto pool's target rises with the claims of a
// refill time (warm creates, cold ones the pool had none for, sessions)
// up to max, and falls back to min_ready once the demand window holds
// none; a fixed pool's target is its min_ready whatever its demand.
func TestAutoPoolTarget(t *testing.T) {
	s, _, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	clock := withClock(s)
	auto := poolID{template: "busybox"}
	for _, p := range []store.Pool{{Template: "busybox", MinReady: 1, Max: 3, Auto: true}, {Template: "busybox", Runtime: "gvisor", MinReady: 1, Max: 4}} {
		if err := st.PutPool(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	s.recordBoot(ctx, auto, 10*time.Second)
	want := func(rows ...string) {
		t.Helper()
		if diff := cmp.Diff(rows, listRows(t, s)); diff != "" {
			t.Errorf("pools (-want +got):\n%s", diff)
		}
	}
	want("busybox/runc auto=true target=1 demand=0", "busybox/gvisor auto=false target=1 demand=0")

	s.WarmDemand(ctx, "busybox", "", true)
	clock.add(time.Second)
	s.WarmDemand(ctx, "busybox", "", false)
	s.sessionColdDemand(ctx, "ses_1", "busybox")
	s.WarmDemand(ctx, "busybox", "gvisor", true)
	want("busybox/runc auto=true target=3 demand=3", "busybox/gvisor auto=false target=1 demand=0")

	// Claims a refill time apart need one ready sandbox at a time.
	clock.add(defaultDemandWindow)
	for range 4 {
		s.WarmDemand(ctx, "busybox", "", true)
		clock.add(15 * time.Second)
	}
	want("busybox/runc auto=true target=1 demand=4", "busybox/gvisor auto=false target=1 demand=0")

	// A burst past max stops at max.
	for range 6 {
		s.WarmDemand(ctx, "busybox", "", true)
	}
	want("busybox/runc auto=true target=3 demand=10", "busybox/gvisor auto=false target=1 demand=0")

	clock.add(defaultDemandWindow + time.Second)
	want("busybox/runc auto=true target=1 demand=0", "busybox/gvisor auto=false target=1 demand=0")
	// Claims past the window are pruned from the store, a fixed pool's
	// too.
	s.pruneDemand(ctx)
	if kept, err := st.PoolClaims(ctx, store.PoolClaimQuery{}); err != nil || len(kept) != 0 {
		t.Errorf("claims kept past the demand window: %v, %v; want none", kept, err)
	}
}

// TestAutoPoolRefillAndDrain: the refill keeps an auto pool at its
// target — filling as demand raises it, draining ready sandboxes as it
// decays — and the memory budget caps what all pools hold.
func TestAutoPoolRefillAndDrain(t *testing.T) {
	s, _, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	mustOrgs(t, s)
	clock := withClock(s)
	if err := st.PutPool(ctx, store.Pool{Template: "busybox", MinReady: 0, Max: 3, Auto: true}); err != nil {
		t.Fatal(err)
	}
	live := func() (ready, all int) {
		pooled, err := s.pooled(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r, p := countMembers(pooled[poolID{template: "busybox"}])
		return r, r + p
	}
	// settle refills until the pool holds want, all ready.
	settle := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			s.refillPools(ctx)
			if r, all := live(); r == want && all == want {
				return
			}
			if time.Now().After(deadline) {
				r, all := live()
				t.Fatalf("pool holds %d (%d ready), want %d ready", all, r, want)
			}
		}
	}
	settle(0)
	for range 5 {
		s.WarmDemand(ctx, "busybox", "", false)
	}
	settle(3)

	// The budget holds two of the default size.
	s.cfg.PoolBudgetMB = 2 * sandbox.DefaultRAM
	settle(2)
	if got := listRows(t, s); got[0] != "busybox/runc auto=true target=2 demand=5" {
		t.Errorf("under a budget of two: %v", got)
	}
	s.cfg.PoolBudgetMB = 0

	clock.add(defaultDemandWindow + time.Second)
	settle(0)
}

// TestRefillWaitsForHandOver: a claim whose hand-over still runs — a
// session's (recorded with the claim, until it answers) or a warm
// create's (its reservation) — holds its place in the pool until it has
// answered, so the refill's boot does not compete with it. The claims are
// in the store: a session claimed through another ptd holds its place
// too.
func TestRefillWaitsForHandOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	s, _, st := newServiceWith(t, &fakeHost{}, path)
	other, _, _ := newServiceWith(t, &fakeHost{}, path) // another ptd on the store
	ctx := context.Background()
	mustOrgs(t, s)
	if err := st.PutPool(ctx, store.Pool{Template: "busybox", MinReady: 1, Max: 2}); err != nil {
		t.Fatal(err)
	}
	members := func() int {
		pooled, err := s.pooled(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(pooled[poolID{template: "busybox"}])
	}
	settleReady(t, s, poolID{template: "busybox"}, 1)

	// A session claims the ready one through the other ptd; its
	// hand-over runs.
	ses := Session{ID: sandbox.NewID(sandbox.PrefixSession), OrgID: org.OrgID, VaultID: "v", WorkflowID: "w",
		Template: "busybox", Status: store.SessionProvisioning, Warm: true}
	if _, _, err := st.ClaimPoolSandbox(ctx, PoolOrgID, "busybox", "prj_x", ses); err != nil {
		t.Fatal(err)
	}
	s.refillPools(ctx)
	if n := members(); n != 0 {
		t.Fatalf("refill during a session's hand-over made %d pooled sandboxes, want 0", n)
	}
	done := other.sessionHandOver(ctx, ses.ID)
	done()
	done() // once is enough
	s.refillPools(ctx)
	if n := members(); n != 1 {
		t.Fatalf("refill after the hand-over: %d pooled sandboxes, want 1", n)
	}

	// A warm create's reservation of that one: not replaced while fresh.
	pooled, _ := s.pooled(ctx)
	id := pooled[poolID{template: "busybox"}][0].ID
	if _, err := st.ModifySandbox(ctx, PoolOrgID, id, func(sb *sandbox.Sandbox) error {
		sb.Metadata[store.MetaPoolClaim] = time.Now().UTC().Format(time.RFC3339) + " " + s.core.WarmClaimOwner()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.refillPools(ctx)
	if n := members(); n != 1 {
		t.Fatalf("refill during a warm create's hand-over: %d pooled sandboxes, want 1 (the reserved one)", n)
	}
}

// settleReady refills s's pools until pool id holds want sandboxes, all
// ready.
func settleReady(t *testing.T, s *Service, id poolID, want int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s.refillPools(context.Background())
		pooled, err := s.pooled(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		r, p := countMembers(pooled[id])
		if r == want && p == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s holds %d ready, %d provisioning; want %d ready", id.key(), r, p, want)
		}
	}
}

// TestAutoPoolDemandKeptInStore: an auto pool's demand and refill time
// are the store's, not one ptd's memory. A ptd started again over the
// same store sizes the pool as before it stopped, and two ptds sharing a
// store each count the other's claims.
func TestAutoPoolDemandKeptInStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	ctx := context.Background()
	auto := poolID{template: "busybox"}
	row := "busybox/runc auto=true target=3 demand=4"
	t.Run("before the restart", func(t *testing.T) {
		s, _, st := newServiceWith(t, &fakeHost{}, path)
		if err := st.PutPool(ctx, store.Pool{Template: "busybox", MinReady: 0, Max: 3, Auto: true}); err != nil {
			t.Fatal(err)
		}
		s.recordBoot(ctx, auto, 20*time.Second)
		s.recordBoot(ctx, auto, 40*time.Second)
		for _, warm := range []bool{true, true, false, true} {
			s.WarmDemand(ctx, "busybox", "", warm)
		}
		if got := listRows(t, s); got[0] != row {
			t.Fatalf("before the restart: %v, want %s", got, row)
		}
	}) // its cleanup closes the service, the core and the store

	s, _, _ := newServiceWith(t, &fakeHost{}, path)
	all, err := s.Pools(ctx, Principal{})
	if err != nil || len(all) != 1 || poolRow(all[0]) != row || all[0].RefillTime != 30*time.Second {
		t.Fatalf("after the restart: %+v, %v; want %s with refill 30s", all, err, row)
	}

	// Another ptd on the same store: its claims are the first one's
	// demand, and the other way round.
	other, _, _ := newServiceWith(t, &fakeHost{}, path)
	clock := withClock(s)
	clock.t = time.Now()
	other.pools.demand.now = clock.now
	clock.add(defaultDemandWindow + time.Minute) // the first claims age out
	if got := listRows(t, s)[0]; got != "busybox/runc auto=true target=0 demand=0" {
		t.Fatalf("once the window passed: %s", got)
	}
	other.WarmDemand(ctx, "busybox", "", true)
	other.WarmDemand(ctx, "busybox", "", false)
	if got := listRows(t, s)[0]; got != "busybox/runc auto=true target=2 demand=2" {
		t.Errorf("the other ptd's claims, as this one sees them: %s; want target 2 demand 2", got)
	}
	s.WarmDemand(ctx, "busybox", "", true)
	if got := listRows(t, other)[0]; got != "busybox/runc auto=true target=3 demand=3" {
		t.Errorf("this ptd's claims, as the other sees them: %s; want target 3 demand 3", got)
	}
}

// TestSetPoolAuto: PUT /v1/pools' auto is stored and listed; an auto pool
// whose max is not above min_ready (nothing to size) is refused and
// changes nothing, as is max under min_ready.
func TestSetPoolAuto(t *testing.T) {
	s, _, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	mustOrgs(t, s)
	admin := Principal{OrgID: tenancy.DefaultOrgID, Role: store.RoleAdmin}
	got, err := s.SetPoolSize(ctx, admin, "busybox", "", PoolSize{MinReady: 0, Max: 3, Auto: true})
	if err != nil || !got.Auto || got.Target != 0 {
		t.Fatalf("SetPoolSize auto = %+v, %v", got, err)
	}
	for _, bad := range []PoolSize{{MinReady: 2, Max: 2, Auto: true}, {MinReady: 3, Max: 1, Auto: true}, {MinReady: -1, Max: 1, Auto: true}} {
		_, err := s.SetPoolSize(ctx, admin, "busybox", "", bad)
		var fe *sandbox.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("SetPoolSize(%+v) = %v, want a FieldError", bad, err)
		}
	}
	stored, err := st.ListPools(ctx)
	if err != nil || len(stored) != 1 || !stored[0].Auto || stored[0].MinReady != 0 || stored[0].Max != 3 {
		t.Errorf("stored pools after refused sets = %+v, %v; want the auto 0:3 one", stored, err)
	}
	// A fixed set of the same pool turns auto off.
	if got, err := s.SetPool(ctx, admin, "busybox", "", 1, 1); err != nil || got.Auto {
		t.Errorf("SetPool = %+v, %v; want auto off", got, err)
	}
}

// TestSessionClaimsAreDemand: a session that claims a pooled sandbox is
// its pool's demand (warm), its hand-over ended once the create answers;
// one that finds the pool empty is demand once recorded (cold); one the
// quota refuses is none.
func TestSessionClaimsAreDemand(t *testing.T) {
	s, _, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	mustOrgs(t, s)
	readyPoolMember(t, st, "busybox")
	claims := func() []string {
		t.Helper()
		cs, err := st.PoolClaims(ctx, store.PoolClaimQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			out = append(out, fmt.Sprintf("%s %s warm=%v handing=%v", c.ID, c.Template, c.Warm, c.HandingOver))
		}
		return out
	}

	mine := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: org.OrgID, State: sandbox.StateRunning,
		Template: "busybox", CPU: 1, RAMMB: 512, DiskGB: 1}
	if err := st.CreateSandbox(ctx, mine); err != nil {
		t.Fatal(err)
	}
	setOrgDefaults(s, st, func(c *tenancy.Config) { c.OrgMaxSandboxes = 1 })
	if _, _, err := s.Create(ctx, org, Request{VaultID: "v", WorkflowID: "refused", Template: "busybox"}); !errors.Is(err, sandbox.ErrQuotaExceeded) {
		t.Fatalf("a create over quota = %v, want refused", err)
	}
	if got := claims(); len(got) != 0 {
		t.Fatalf("claims after a refused create: %q, want none", got)
	}
	setOrgDefaults(s, st, func(c *tenancy.Config) { c.OrgMaxSandboxes = 3 })
	warm, _, err := s.Create(ctx, org, Request{VaultID: "v", WorkflowID: "warm", Template: "busybox"})
	if err != nil || !warm.Warm {
		t.Fatalf("warm create = %+v, %v", warm, err)
	}
	cold, _, err := s.Create(ctx, org, Request{VaultID: "v", WorkflowID: "cold", Template: "busybox"})
	if err != nil || cold.Warm {
		t.Fatalf("cold create = %+v, %v", cold, err)
	}
	want := []string{warm.ID + " busybox warm=true handing=false", cold.ID + " busybox warm=false handing=false"}
	if diff := cmp.Diff(want, claims()); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
}

// TestDemandReadSinceLastPass: a pass reads the claims since the last one
// (less readOverlap) and keeps the earlier ones it read; a claim committed
// later than that after the time it carries counts at the next full read
// of the window (fullReadEvery), and claims past the window drop out.
func TestDemandReadSinceLastPass(t *testing.T) {
	s, _, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	clock := withClock(s)
	if err := st.PutPool(ctx, store.Pool{Template: "busybox", MinReady: 0, Max: 10, Auto: true}); err != nil {
		t.Fatal(err)
	}
	s.recordBoot(ctx, poolID{template: "busybox"}, time.Hour) // every claim of the window within one refill
	demand := func() string { t.Helper(); return listRows(t, s)[0] }
	late := func(ago time.Duration) { // a claim committed now that carries an earlier time
		t.Helper()
		c := store.PoolClaim{ID: sandbox.NewID(poolClaimPrefix), Template: "busybox", At: clock.now().Add(-ago), Warm: true}
		if err := st.AddPoolClaim(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	s.WarmDemand(ctx, "busybox", "", true)
	if got := demand(); got != "busybox/runc auto=true target=1 demand=1" {
		t.Fatalf("first read: %s", got)
	}
	clock.add(5 * time.Second)
	late(readOverlap - 5*time.Second + time.Second) // within the overlap of the last read
	s.WarmDemand(ctx, "busybox", "", true)
	if got := demand(); got != "busybox/runc auto=true target=3 demand=3" {
		t.Fatalf("a late claim within the overlap: %s, want demand 3", got)
	}
	late(readOverlap + time.Minute) // before the overlap: not read again until the full read
	if got := demand(); got != "busybox/runc auto=true target=3 demand=3" {
		t.Fatalf("a claim later than the overlap: %s, want it unread yet (demand 3)", got)
	}
	clock.add(fullReadEvery)
	if got := demand(); got != "busybox/runc auto=true target=4 demand=4" {
		t.Fatalf("after a full read: %s, want demand 4", got)
	}
	clock.add(defaultDemandWindow)
	if got := demand(); got != "busybox/runc auto=true target=0 demand=0" {
		t.Fatalf("past the window: %s, want demand 0", got)
	}
}
