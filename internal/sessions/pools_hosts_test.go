package sessions

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/tenancy"
	"github.com/prometheus/client_golang/prometheus"
)

// namedHost is a test host with its own ID, for two control planes on one
// store.
type namedHost struct {
	*fakeHost
	id string
}

func (h namedHost) ID() string { return h.id }

// TestPoolsAcrossHosts: two control planes (two ptd processes, two hosts)
// sharing one store and one warm pool. Refills racing from both make the
// pool's min_ready platform-wide, not once per host (one creates at a time,
// under LeasePools); a failed pooled sandbox is disposed of by its own host
// only, never by the other (whose runtime does not hold it).
func TestPoolsAcrossHosts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	hA, hB := &fakeHost{}, &fakeHost{}
	a, _, st := newServiceWith(t, namedHost{hA, "host_a"}, path)
	b, _, _ := newServiceWith(t, namedHost{hB, "host_b"}, path)
	ctx := context.Background()
	if err := a.ensurePoolOrg(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.PutPool(ctx, store.Pool{Template: "busybox", MinReady: 2, Max: 2}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 3 {
		for _, s := range []*Service{a, b} {
			wg.Add(1)
			go func() { defer wg.Done(); s.refillPools(ctx) }()
		}
		wg.Wait()
	}
	pooled, err := a.pooled(ctx)
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, sb := range pooled[poolID{template: "busybox"}] {
		if sb.State == sandbox.StateCreating || sb.State == sandbox.StateStarting || sb.State == sandbox.StateRunning {
			live++
		}
	}
	if live > 2 {
		t.Fatalf("%d live pooled sandboxes after refills racing from two hosts, want at most min_ready 2", live)
	}

	// A failed pooled sandbox of b's: a leaves it alone, b disposes of it.
	now := time.Now().UTC().Truncate(time.Microsecond)
	victim := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: PoolOrgID, Template: "busybox",
		State: sandbox.StateFailed, Reason: "test", HostID: "host_b", CPU: 1, RAMMB: 512, DiskGB: 2,
		Metadata: map[string]string{store.MetaPool: "busybox"}, CreatedAt: now, UpdatedAt: now}
	if err := st.CreateSandbox(ctx, victim); err != nil {
		t.Fatal(err)
	}
	a.refillPools(ctx)
	if cur, _ := st.GetSandbox(ctx, "", victim.ID); cur.State != sandbox.StateFailed {
		t.Fatalf("host_a's refill moved host_b's failed pooled sandbox to %s", cur.State)
	}
	b.refillPools(ctx)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		cur, _ := st.GetSandbox(ctx, "", victim.ID)
		if cur.State == sandbox.StateDeleting || cur.State == sandbox.StateDeleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("its own host never disposed of the failed pooled sandbox: %s", cur.State)
		}
	}
}

// TestHostPoolsAndMetrics: GET /v1/hosts counts each host's pool members
// by template and runtime class and /metrics each pool's, ready apart from
// provisioning; members being disposed of are neither.
func TestHostPoolsAndMetrics(t *testing.T) {
	s, _, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	if err := s.ensurePoolOrg(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []store.Pool{{Template: "busybox", MinReady: 3, Max: 5}, {Template: "busybox", Runtime: "gvisor", MinReady: 1, Max: 2}} {
		if err := st.PutPool(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	member := func(host string, state sandbox.State, ready bool, class ...string) {
		md := map[string]string{store.MetaPool: "busybox"}
		rt := "runc"
		if len(class) > 0 {
			rt, md[store.MetaPool] = class[0], store.PoolKey("busybox", class[0])
		}
		if ready {
			md[store.MetaPoolReady] = "1"
		}
		sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: PoolOrgID, HostID: host, State: state,
			Template: "busybox", Runtime: rt, CPU: sandbox.DefaultCPU, RAMMB: sandbox.DefaultRAM, DiskGB: sandbox.DefaultDisk, Metadata: md}
		if err := st.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	member("host_a", sandbox.StateRunning, true)
	member("host_a", sandbox.StateRunning, true)
	member("host_a", sandbox.StateCreating, false)
	member("host_b", sandbox.StateRunning, true)
	member("host_b", sandbox.StateDeleting, false)
	member("host_b", sandbox.StateRunning, true, "gvisor")

	got, err := s.HostPools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]HostPool{
		"host_a": {{Template: "busybox", Runtime: "runc", Ready: 2, Provisioning: 1}},
		"host_b": {{Template: "busybox", Runtime: "runc", Ready: 1}, {Template: "busybox", Runtime: "gvisor", Ready: 1}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("HostPools (-want +got):\n%s", diff)
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			series[key] = m.GetGauge().GetValue()
		}
	}
	wantSeries := map[string]float64{
		"platinum_warm_pool_sandboxes,runtime=runc,state=ready,template=busybox":          3,
		"platinum_warm_pool_sandboxes,runtime=runc,state=provisioning,template=busybox":   1,
		"platinum_warm_pool_min_ready,runtime=runc,template=busybox":                      3,
		"platinum_warm_pool_max,runtime=runc,template=busybox":                            5,
		"platinum_warm_pool_target,runtime=runc,template=busybox":                         3,
		"platinum_warm_pool_sandboxes,runtime=gvisor,state=ready,template=busybox":        1,
		"platinum_warm_pool_sandboxes,runtime=gvisor,state=provisioning,template=busybox": 0,
		"platinum_warm_pool_min_ready,runtime=gvisor,template=busybox":                    1,
		"platinum_warm_pool_max,runtime=gvisor,template=busybox":                          2,
		"platinum_warm_pool_target,runtime=gvisor,template=busybox":                       1,
	}
	if diff := cmp.Diff(wantSeries, series); diff != "" {
		t.Errorf("pool series (-want +got):\n%s", diff)
	}
}

// TestPoolsPerRuntimeClass: a pool is a template and a runtime class. A
// setting naming the default class is the default class's pool (one pool,
// not two); another class's pool is filled with sandboxes of that class,
// marked as its members (store.PoolKey); GET /v1/pools lists each with
// its class; a session, which boots the default class, never claims
// another class's sandbox; an unknown class is refused.
func TestPoolsPerRuntimeClass(t *testing.T) {
	s, _, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	mustOrgs(t, s)
	admin := Principal{OrgID: tenancy.DefaultOrgID, Role: store.RoleAdmin}
	for _, tc := range []struct {
		class    string
		min, max int
		wantErr  bool
	}{
		{"", 0, 1, false},
		{"runc", 0, 1, false}, // the default class, named: the same pool
		{"gvisor", 2, 2, false},
		{"kata", 1, 1, true},
	} {
		_, err := s.SetPool(ctx, admin, "busybox", tc.class, tc.min, tc.max)
		var fe *sandbox.FieldError
		if tc.wantErr != (err != nil) || (tc.wantErr && (!errors.As(err, &fe) || fe.Field != "runtime")) {
			t.Fatalf("SetPool(%q) = %v, want an error %v", tc.class, err, tc.wantErr)
		}
	}
	stored, err := st.ListPools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, p := range stored {
		keys = append(keys, store.PoolKey(p.Template, p.Runtime))
	}
	if diff := cmp.Diff([]string{"busybox", "busybox@gvisor"}, keys); diff != "" {
		t.Errorf("stored pools (-want +got):\n%s", diff)
	}

	s.refillPools(ctx)
	pooled, err := s.pooled(ctx)
	if err != nil {
		t.Fatal(err)
	}
	members := pooled[poolID{"busybox", "gvisor"}]
	if len(members) != 2 || len(pooled[poolID{template: "busybox"}]) != 0 {
		t.Fatalf("after a refill: %d gvisor members, %d default; want 2 and 0", len(members), len(pooled[poolID{template: "busybox"}]))
	}
	for _, sb := range members {
		if sb.Runtime != "gvisor" || sb.Metadata[store.MetaPool] != "busybox@gvisor" {
			t.Errorf("gvisor pool member: runtime %s, %s=%q", sb.Runtime, store.MetaPool, sb.Metadata[store.MetaPool])
		}
	}
	all, err := s.Pools(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, ps := range all {
		listed = append(listed, fmt.Sprintf("%s/%s %d:%d", ps.Template, ps.Runtime, ps.MinReady, ps.Max))
	}
	if diff := cmp.Diff([]string{"busybox/runc 0:1", "busybox/gvisor 2:2"}, listed); diff != "" {
		t.Errorf("Pools (-want +got):\n%s", diff)
	}

	// Ready gvisor members do not serve a session: it boots cold.
	pool := Principal{OrgID: PoolOrgID, Role: store.RoleAdmin}
	for _, sb := range members {
		if _, ok, err := s.core.WaitFor(ctx, pool, sb.ID, sandbox.StateRunning, 5*time.Second); err != nil || !ok {
			t.Fatalf("gvisor pool member not running: %v", err)
		}
		if ok, err := s.core.SetPlatformMetadata(ctx, PoolOrgID, sb.ID, store.MetaPoolReady, "1", sandbox.StateRunning); err != nil || !ok {
			t.Fatalf("mark ready: %v %v", ok, err)
		}
	}
	ses, _, err := s.Create(ctx, org, Request{VaultID: "v", WorkflowID: "w", Template: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	if ses.Warm || slices.ContainsFunc(members, func(sb sandbox.Sandbox) bool { return sb.ID == ses.SandboxID }) {
		t.Errorf("a session claimed a gvisor pool's sandbox: %+v", ses)
	}
}

// TestPoolFlagsPerRuntimeClass: ptd's --warm-pool defaults name a class
// with TEMPLATE@CLASS (the default class named is the default pool); Run
// refuses a class the host does not run rather than never fill it.
func TestPoolFlagsPerRuntimeClass(t *testing.T) {
	s, _, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	s.cfg.Pools = map[string]PoolSize{"busybox@runc": {MinReady: 1, Max: 1}, "busybox@gvisor": {MinReady: 0, Max: 2}}
	all, err := s.Pools(ctx, Principal{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, ps := range all {
		listed = append(listed, fmt.Sprintf("%s/%s %d:%d %s", ps.Template, ps.Runtime, ps.MinReady, ps.Max, ps.Source))
	}
	if diff := cmp.Diff([]string{"busybox/runc 1:1 default", "busybox/gvisor 0:2 default"}, listed); diff != "" {
		t.Errorf("Pools (-want +got):\n%s", diff)
	}

	s.cfg.Pools = map[string]PoolSize{"busybox@kata": {MinReady: 1, Max: 1}}
	var fe *sandbox.FieldError
	if err := s.Run(ctx); !errors.As(err, &fe) || fe.Field != "runtime" {
		t.Errorf("Run with a pool of a class the host does not run = %v, want a runtime FieldError", err)
	}
}

// TestReconcileLeavesOtherHostsSessions: a ptd starting on a shared store
// resumes the in-flight sessions of its own host only; one whose sandbox
// another live host runs is that host's ptd's to finish (here: a
// provisioning that b's crash interrupted, which b's restart finishes),
// unless that host is lost.
func TestReconcileLeavesOtherHostsSessions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	a, _, st := newServiceWith(t, namedHost{&fakeHost{}, "host_a"}, path)
	b, _, _ := newServiceWith(t, namedHost{&fakeHost{}, "host_b"}, path)
	ctx := context.Background()
	for _, id := range []string{"host_a", "host_b"} {
		if _, err := st.RegisterHost(ctx, store.HostRecord{ID: id, URL: "http://" + id + ".invalid"}); err != nil {
			t.Fatal(err)
		}
	}
	// inFlight is a session of b's whose provisioning b's crash
	// interrupted: its sandbox runs on b, nothing drives the session.
	inFlight := func(wf string) Session {
		t.Helper()
		ses, _, err := b.Create(ctx, org, Request{VaultID: "v", WorkflowID: wf, Template: "busybox"})
		if err != nil {
			t.Fatal(err)
		}
		if ses, err = b.Wait(ctx, org, ses.ID, 5*time.Second); err != nil || ses.Status != store.SessionReady {
			t.Fatalf("session on b: %+v %v", ses, err)
		}
		if sb, err := st.GetSandbox(ctx, "", ses.SandboxID); err != nil || sb.HostID != "host_b" {
			t.Fatalf("session's sandbox on %q (%v), want host_b", sb.HostID, err)
		}
		ses, err = b.setSession(ctx, ses, store.SessionProvisioning, "", func(x *Session) { x.ReadyAt = nil })
		if err != nil {
			t.Fatal(err)
		}
		return ses
	}
	ses := inFlight("wf-b")
	if err := a.reconcileSessions(ctx); err != nil {
		t.Fatal(err)
	}
	// Had a resumed it, the session would be ready well within the wait
	// (b's own restart below makes it so at once).
	if got, _ := a.Wait(ctx, org, ses.ID, 2*time.Second); got.Status != store.SessionProvisioning {
		t.Fatalf("a's start drove b's session: %s, want it left provisioning", got.Status)
	}
	if err := b.reconcileSessions(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Wait(ctx, org, ses.ID, 5*time.Second); err != nil || got.Status != store.SessionReady {
		t.Fatalf("b's restart: %+v %v, want its session ready", got, err)
	}

	// b lost: its sessions are any ptd's to resume.
	ses = inFlight("wf-lost")
	if !a.sessionElsewhere(ctx, ses) {
		t.Fatal("a session on live host b counts as a's")
	}
	if _, err := st.SetHostState(ctx, "host_b", 0, store.HostLost, "test"); err != nil {
		t.Fatal(err)
	}
	if a.sessionElsewhere(ctx, ses) {
		t.Fatal("a session on lost host b is left to b")
	}
}
