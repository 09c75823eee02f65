package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/hostapi/nohost"
	"github.com/platinum-dev/platinum/internal/hostreg"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// TestStartOnlyOnTheDisksHost: a stopped or failed sandbox whose record
// names another host (lost, or reached past forwarding) is refused with
// ErrUnavailable and left as it was, since this host has no disk of it; an
// archived one starts here, its disk coming from the object store, and
// becomes this host's.
func TestStartOnlyOnTheDisksHost(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	for _, st := range []sandbox.State{sandbox.StateStopped, sandbox.StateFailed} {
		sb := running(t, s, CreateRequest{Template: "busybox"})
		setRecord(t, s, sb.ID, func(x *sandbox.Sandbox) { x.State, x.HostID = st, "host_other" })
		if _, err := s.Start(ctx, org, sb.ID); !errors.Is(err, sandbox.ErrUnavailable) {
			t.Fatalf("start of a %s sandbox of another host: %v, want unavailable", st, err)
		}
		if got, _ := s.store.GetSandbox(ctx, "", sb.ID); got.State != st || got.HostID != "host_other" {
			t.Fatalf("refused start changed the record: %s on %s", got.State, got.HostID)
		}
	}
	sb := running(t, s, CreateRequest{Template: "busybox"})
	setRecord(t, s, sb.ID, func(x *sandbox.Sandbox) {
		x.State, x.HostID, x.Archive = sandbox.StateArchived, "host_other", &sandbox.ArchiveRef{Bucket: "arch", ManifestKey: "m", Complete: true}
	})
	got, err := s.Start(ctx, org, sb.ID)
	if err != nil || got.State != sandbox.StateRestoring || got.HostID != s.host.ID() {
		t.Fatalf("start of an archived sandbox of another host: %s on %s, %v; want restoring here", got.State, got.HostID, err)
	}
}

// TestFenceAndUnfence: Fence stops every sandbox the host runs, keeping
// memory, and reads nothing from the store; Unfence thaws the ones whose
// records still say they run here and leaves one recovered elsewhere
// meanwhile to the sweep.
func TestFenceAndUnfence(t *testing.T) {
	stopped := map[string]bool{}
	h := &cleanHost{fakeHost: &fakeHost{}}
	h.running = func(id string) bool { return !stopped[id] }
	s, _ := newServiceWith(t, h, "", nil)
	ctx := context.Background()
	stays := running(t, s, CreateRequest{Template: "busybox"})
	moved := running(t, s, CreateRequest{Template: "busybox"})
	h.holdings = []hostapi.Holding{{ID: stays.ID, Container: true}, {ID: moved.ID, Container: true},
		{ID: sandbox.NewID(sandbox.PrefixSandbox), Disk: true}}
	s.Fence(ctx)
	for _, id := range []string{stays.ID, moved.ID} {
		if !h.Frozen(ctx, id) {
			t.Fatalf("%s not stopped with its memory by Fence", id)
		}
		stopped[id] = true
	}
	setRecord(t, s, moved.ID, func(x *sandbox.Sandbox) { x.HostID = "host_other" })
	s.Unfence(ctx)
	if h.Frozen(ctx, stays.ID) {
		t.Fatal("Unfence left the sandbox that still runs here stopped")
	}
	if !h.Frozen(ctx, moved.ID) {
		t.Fatal("Unfence started the sandbox recovered on another host")
	}
	got, _ := s.store.GetSandbox(ctx, "", stays.ID)
	if got.State != sandbox.StateRunning {
		t.Fatalf("unfenced sandbox is %s", got.State)
	}
}

// TestRelocateOnCapacity: a start the full queue refuses moves a stopped
// sandbox with a current stop snapshot to the other active host that
// runs its class (202 relocating, the record that host's, restoring); a
// sandbox relocated within the guard, one whose stop snapshot predates its
// stop, or one with nowhere to go answers the queue's refusal and stays.
func TestRelocateOnCapacity(t *testing.T) {
	s, st := newServiceWith(t, &fakeHost{}, "", func(c *Config) {
		c.Admission = AdmissionConfig{Queue: true, Slots: 1, Wait: 10 * time.Millisecond, MaxQueue: 8}
		c.RelocateOnCapacity, c.RelocateGuard = true, time.Hour
	})
	ctx := context.Background()
	hold, err := s.starts.acquire(ctx, "org_other") // the host's one start slot
	if err != nil {
		t.Fatal(err)
	}
	defer hold()
	stoppedWithSnapshot := func(age time.Duration) sandbox.Sandbox {
		t.Helper()
		sb := running(t, s, CreateRequest{Template: "busybox"})
		stopped := s.now().Add(-time.Minute)
		sb = setRecord(t, s, sb.ID, func(x *sandbox.Sandbox) { x.State, x.StoppedAt = sandbox.StateStopped, &stopped })
		snap := sandbox.Snapshot{ID: sandbox.NewID(sandbox.PrefixBackup), OrgID: sb.OrgID, SandboxID: sb.ID, Name: StopSnapshotName,
			Kind: sandbox.KindBackup, State: sandbox.SnapshotReady, CreatedAt: stopped.Add(age)}
		if err := st.CreateSnapshot(ctx, snap); err != nil {
			t.Fatal(err)
		}
		return sb
	}
	var ce *CapacityError
	sb := stoppedWithSnapshot(time.Second)
	if _, err := s.StartWithin(ctx, org, sb.ID, 0); !errors.As(err, &ce) {
		t.Fatalf("start with no other host: %v, want the queue's refusal", err)
	}
	capOf := func(classes ...string) []byte {
		c := hostreg.Capacity{CPU: 2, RAMMB: 4096}
		for _, cl := range classes {
			c.Classes = append(c.Classes, hostreg.ClassCap{Name: cl})
		}
		b, _ := json.Marshal(c)
		return b
	}
	for _, h := range []store.HostRecord{{ID: "host_gvisor_only", Capacity: capOf("gvisor")}, {ID: "host_other", Capacity: capOf("runc", "gvisor")}} {
		if _, err := st.RegisterHost(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.StartWithin(ctx, org, sb.ID, 0)
	var re *RelocatingError
	if !errors.As(err, &re) || got.State != sandbox.StateRestoring || got.HostID != "host_other" || re.To != "host_other" || !relocating(got) {
		t.Fatalf("start on a full host: %s on %s, %v; want relocating to host_other", got.State, got.HostID, err)
	}
	// Back here and stopped again within the guard: it stays.
	setRecord(t, s, sb.ID, func(x *sandbox.Sandbox) {
		x.State, x.HostID, x.RestoreSnapshotID, x.Reason = sandbox.StateStopped, s.host.ID(), "", ""
	})
	if _, err := s.StartWithin(ctx, org, sb.ID, 0); !errors.As(err, &ce) {
		t.Fatalf("second relocation within the guard: %v, want the queue's refusal", err)
	}
	// A snapshot from before the stop does not hold its disk as it stopped.
	old := stoppedWithSnapshot(-time.Second)
	if _, err := s.StartWithin(ctx, org, old.ID, 0); !errors.As(err, &ce) {
		t.Fatalf("relocation through a stale stop snapshot: %v, want the queue's refusal", err)
	}
	if cur, _ := st.GetSandbox(ctx, "", old.ID); cur.State != sandbox.StateStopped || cur.HostID != s.host.ID() {
		t.Fatalf("refused start moved the sandbox: %s on %s", cur.State, cur.HostID)
	}
}

// TestDrainedHostsStoppedSandboxesStartElsewhere: with stop snapshots on
// (and relocation on capacity off), a start of a stopped sandbox while its
// host drains moves it to an active host through its current stop
// snapshot, even one relocated moments ago (the guard is for busy hosts);
// one without a current snapshot starts on the draining host, as does any
// start once the host is active again.
func TestDrainedHostsStoppedSandboxesStartElsewhere(t *testing.T) {
	s, st := newServiceWith(t, &fakeHost{}, "", func(c *Config) { c.StopSnapshots, c.RelocateGuard = true, time.Hour })
	ctx := context.Background()
	other, _ := json.Marshal(hostreg.Capacity{CPU: 2, RAMMB: 4096, Classes: []hostreg.ClassCap{{Name: "runc"}, {Name: "gvisor"}}})
	for _, h := range []store.HostRecord{{ID: s.host.ID()}, {ID: "host_other", Capacity: other}} {
		if _, err := st.RegisterHost(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	stopped := func(snapshot bool) sandbox.Sandbox {
		t.Helper()
		sb := running(t, s, CreateRequest{Template: "busybox"})
		at := s.now().Add(-time.Minute)
		sb = setRecord(t, s, sb.ID, func(x *sandbox.Sandbox) {
			x.State, x.StoppedAt = sandbox.StateStopped, &at
			x.Metadata = map[string]string{MetaRelocatedAt: s.now().Format(time.RFC3339)}
		})
		if snapshot {
			snap := sandbox.Snapshot{ID: sandbox.NewID(sandbox.PrefixBackup), OrgID: sb.OrgID, SandboxID: sb.ID, Name: StopSnapshotName,
				Kind: sandbox.KindBackup, State: sandbox.SnapshotReady, CreatedAt: at.Add(time.Second)}
			if err := st.CreateSnapshot(ctx, snap); err != nil {
				t.Fatal(err)
			}
		}
		return sb
	}
	withSnap, without, later := stopped(true), stopped(false), stopped(true)
	drain := func(state store.HostState) {
		t.Helper()
		if _, err := st.SetHostState(ctx, s.host.ID(), 0, state, "test"); err != nil {
			t.Fatal(err)
		}
	}
	drain(store.HostDraining)
	got, err := s.StartWithin(ctx, org, withSnap.ID, 0)
	var re *RelocatingError
	if !errors.As(err, &re) || got.HostID != "host_other" || !relocating(got) || !strings.Contains(got.Reason, ReasonHostDraining) {
		t.Fatalf("start on a draining host: %s on %s (%q), %v; want relocating to host_other", got.State, got.HostID, got.Reason, err)
	}
	if got, err := s.StartWithin(ctx, org, without.ID, 0); err != nil || got.HostID != s.host.ID() || got.State == sandbox.StateStopped {
		t.Fatalf("start without a stop snapshot on a draining host: %s on %s, %v; want it started here", got.State, got.HostID, err)
	}
	drain(store.HostActive)
	if got, err := s.StartWithin(ctx, org, later.ID, 0); err != nil || got.HostID != s.host.ID() {
		t.Fatalf("start once the host is active again: %s on %s, %v; want it started here", got.State, got.HostID, err)
	}
}

// TestAnAPIOnlyPtdTakesNoLostSandbox: a start through a ptd that runs no
// sandboxes never moves a lost host's stopped sandbox to itself, stop
// snapshot or not (forwarding sends such a start to a host); it answers
// unavailable and the record stays.
func TestAnAPIOnlyPtdTakesNoLostSandbox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	s, st := newServiceWith(t, &fakeHost{}, path, nil)
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox"})
	stopped := s.now().Add(-time.Minute)
	sb = setRecord(t, s, sb.ID, func(x *sandbox.Sandbox) { x.State, x.StoppedAt = sandbox.StateStopped, &stopped })
	snap := sandbox.Snapshot{ID: sandbox.NewID(sandbox.PrefixBackup), OrgID: sb.OrgID, SandboxID: sb.ID, Name: StopSnapshotName,
		Kind: sandbox.KindBackup, State: sandbox.SnapshotReady, CreatedAt: stopped.Add(time.Second)}
	if err := st.CreateSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RegisterHost(ctx, store.HostRecord{ID: sb.HostID}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetHostState(ctx, sb.HostID, 0, store.HostLost, "test"); err != nil {
		t.Fatal(err)
	}
	api, _ := newServiceWith(t, nohost.New("api_test"), path, nil)
	if _, err := api.StartWithin(ctx, org, sb.ID, 0); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("start through an api-only ptd: %v, want unavailable", err)
	}
	if cur, _ := st.GetSandbox(ctx, "", sb.ID); cur.State != sandbox.StateStopped || cur.HostID != sb.HostID {
		t.Fatalf("the refused start moved the sandbox: %s on %s", cur.State, cur.HostID)
	}
}
