package controlplane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// snapHost is a fakeHost that can snapshot: gvisor checkpoints, runc
// does not (as on these machines without CRIU).
type snapHost struct {
	*fakeHost
	mu       sync.Mutex
	restored []string // sandbox IDs whose disk RestoreDisk replaced
	removed  []string
}

var _ Snapshotter = (*snapHost)(nil)

func (h *snapHost) MemorySnapshots(class string) (bool, string) {
	if class == "gvisor" {
		return true, ""
	}
	return false, "criu is not installed"
}

func (h *snapHost) Snapshot(ctx context.Context, id, snapID, class string, memory bool) (SnapshotFiles, error) {
	f := SnapshotFiles{DiskImage: "/pool/" + snapID + ".img", SizeBytes: 1 << 30}
	if memory {
		f.MemoryImage = "/snapshots/" + snapID + "/memory"
	}
	return f, nil
}

func (h *snapHost) RemoveSnapshot(ctx context.Context, snapID string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removed = append(h.removed, snapID)
	return nil
}

func (h *snapHost) RestoreDisk(ctx context.Context, id, snapID string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.restored = append(h.restored, id)
	return nil
}

func newSnapService(t *testing.T, h *snapHost, path string) *Service {
	t.Helper()
	s, _ := newServiceWith(t, h, path, nil)
	return s
}

func runningSandbox(t *testing.T, s *Service, class string) sandbox.Sandbox {
	t.Helper()
	sb, err := s.Create(context.Background(), org, CreateRequest{Template: "busybox", Runtime: class})
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.WaitFor(context.Background(), org, sb.ID, sandbox.StateRunning, 5*time.Second)
	if err != nil || !ok {
		t.Fatalf("wait running: %+v %v", got, err)
	}
	return got
}

func TestSnapshotMemoryChoice(t *testing.T) {
	s := newSnapService(t, &snapHost{fakeHost: &fakeHost{}}, filepath.Join(t.TempDir(), "db"))
	yes, no := true, false
	for _, tc := range []struct {
		class   string
		memory  *bool
		want    bool
		wantErr bool
	}{
		{"gvisor", nil, true, false},
		{"gvisor", &yes, true, false},
		{"gvisor", &no, false, false},
		{"runc", nil, false, false},
		{"runc", &no, false, false},
		{"runc", &yes, false, true},
	} {
		sb := runningSandbox(t, s, tc.class)
		snap, err := s.Snapshot(context.Background(), org, sb.ID, SnapshotRequest{Memory: tc.memory})
		var me *MemorySnapshotError
		switch {
		case tc.wantErr:
			if !errors.As(err, &me) || me.Class != "runc" || !errors.Is(err, sandbox.ErrConflict) {
				t.Errorf("%s memory=%v: err = %v, want MemorySnapshotError", tc.class, *tc.memory, err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.class, err)
		case snap.Memory != tc.want || snap.State != sandbox.SnapshotReady || snap.Source.Runtime != tc.class:
			t.Errorf("%s memory=%v: snapshot %+v, want memory %v, ready", tc.class, tc.memory, snap, tc.want)
		}
	}
	// Another org sees nothing; bad names are refused.
	sb := runningSandbox(t, s, "runc")
	snap, err := s.Snapshot(context.Background(), org, sb.ID, SnapshotRequest{Name: "ok-name"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSnapshot(context.Background(), Principal{OrgID: "org_b"}, snap.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("another org's GetSnapshot = %v, want not found", err)
	}
	var fe *sandbox.FieldError
	if _, err := s.Snapshot(context.Background(), org, sb.ID, SnapshotRequest{Name: "bad name"}); !errors.As(err, &fe) || fe.Field != "name" {
		t.Errorf("bad name: %v", err)
	}
}

// TestRestoreSurvivesCrash: a restore in place interrupted by ptd dying
// (the service closes while the host start hangs) is finished by the
// next service's reconciler: the disk is replaced again and the sandbox
// runs, never stuck in restoring.
func TestRestoreSurvivesCrash(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db")
	block := make(chan struct{})
	var blocking sync.Once
	h := &snapHost{fakeHost: &fakeHost{}}
	s1 := newSnapService(t, h, db)
	sb := runningSandbox(t, s1, "runc")
	snap, err := s1.Snapshot(context.Background(), org, sb.ID, SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	h.StartFunc = func(ctx context.Context, spec StartSpec) (Instance, error) {
		blocking.Do(func() { close(started) })
		select {
		case <-block:
		case <-ctx.Done():
			return Instance{}, ctx.Err()
		}
		return Instance{Address: "127.0.0.1"}, nil
	}
	got, err := s1.Restore(context.Background(), org, sb.ID, snap.ID)
	if err != nil || got.State != sandbox.StateRestoring {
		t.Fatalf("Restore = %+v, %v", got, err)
	}
	<-started
	s1.Close() // ptd dies mid-restore

	close(block)
	s2 := newSnapService(t, h, db)
	if err := s2.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s2.WaitFor(context.Background(), org, sb.ID, sandbox.StateRunning, 5*time.Second)
	if err != nil || !ok || got.RestoreSnapshotID != "" || got.LastStart == nil || got.LastStart.Restore != sandbox.RestoreDiskOnly {
		t.Fatalf("after the reconciler: %+v %v %v", got, ok, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.restored) != 2 {
		t.Errorf("disk replaced %d times, want 2 (once before the crash, once after)", len(h.restored))
	}
}

func TestRestoreAndForkValidation(t *testing.T) {
	h := &snapHost{fakeHost: &fakeHost{}}
	s := newSnapService(t, h, filepath.Join(t.TempDir(), "db"))
	ctx := context.Background()
	a, b := runningSandbox(t, s, "runc"), runningSandbox(t, s, "runc")
	snapB, err := s.Snapshot(ctx, org, b.ID, SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var nf interface{ Field() string }
	if _, err := s.Restore(ctx, org, a.ID, snapB.ID); !errors.As(err, &nf) || nf.Field() != "snapshot_id" {
		t.Errorf("restore to another sandbox's snapshot: %v", err)
	}
	var fe *sandbox.FieldError
	if _, err := s.Restore(ctx, org, a.ID, ""); !errors.As(err, &fe) {
		t.Errorf("restore without a snapshot: %v", err)
	}
	for _, n := range []int{0, MaxForks + 1} {
		if _, err := s.Fork(ctx, org, a.ID, ForkRequest{Count: n}); !errors.As(err, &fe) || fe.Field != "count" {
			t.Errorf("fork count %d: %v", n, err)
		}
	}
	if _, err := s.Create(ctx, org, CreateRequest{FromSnapshot: snapB.ID, Runtime: "gvisor"}); !errors.As(err, &fe) || fe.Field != "runtime" {
		t.Errorf("clone into another class: %v", err)
	}

	res, err := s.Fork(ctx, org, b.ID, ForkRequest{Count: 3})
	if err != nil || len(res.Sandboxes) != 3 || res.Memory || res.MemoryReason == "" {
		t.Fatalf("fork = %+v, %v", res, err)
	}
	for _, f := range res.Sandboxes {
		got, ok, err := s.WaitFor(ctx, org, f.ID, sandbox.StateRunning, 5*time.Second)
		if err != nil || !ok || got.ParentID != b.ID || got.SourceSnapshotID == "" || got.LastStart == nil {
			t.Errorf("fork %s: %+v", f.ID, got)
		}
	}
	// The fork's internal snapshot goes once every fork runs.
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, _ := s.store.ListSnapshots(ctx, store.SnapshotFilter{SandboxID: b.ID})
		if len(l) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshots of the source after the fork: %d, want only the user's", len(l))
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A stopped sandbox can be restored; a snapshot in use cannot go.
	if _, err := s.Stop(ctx, org, b.ID); err != nil {
		t.Fatal(err)
	}
	s.WaitFor(ctx, org, b.ID, sandbox.StateStopped, 5*time.Second)
	if _, err := s.Restore(ctx, org, b.ID, snapB.ID); err != nil {
		t.Fatalf("restore of a stopped sandbox: %v", err)
	}
	if got, ok, _ := s.WaitFor(ctx, org, b.ID, sandbox.StateRunning, 5*time.Second); !ok {
		t.Fatalf("restore of a stopped sandbox ended %s (%s)", got.State, got.Reason)
	}
	if err := s.DeleteSnapshot(ctx, org, snapB.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := s.GetSnapshot(ctx, org, snapB.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
}

// TestDisposalOfSnapshots: final disposal queues a purged sandbox's
// backup manifest and descriptor (never chunks) in the ledger, removes its
// local snapshots, and a complete backup extends a platform deletion's
// retention as a complete archive does; an incomplete one does not.
func TestDisposalOfSnapshots(t *testing.T) {
	h := &snapHost{fakeHost: &fakeHost{}}
	s := newSnapService(t, h, filepath.Join(t.TempDir(), "db"))
	ctx := context.Background()
	s.cfg.DeletedRetention, s.cfg.PlatformRecoveryRetention = time.Hour, 3*time.Hour
	mk := func(reason string, backup sandbox.SnapshotState) (sandbox.Sandbox, sandbox.Snapshot) {
		sb := runningSandbox(t, s, "runc")
		if _, err := s.Snapshot(ctx, org, sb.ID, SnapshotRequest{}); err != nil {
			t.Fatal(err)
		}
		bk := sandbox.Snapshot{ID: sandbox.NewID(sandbox.PrefixBackup), OrgID: org.OrgID, SandboxID: sb.ID,
			Kind: sandbox.KindBackup, State: backup, Bucket: "arch"}
		if backup == sandbox.SnapshotReady {
			bk.ManifestKey = "manifests/" + bk.ID + ".json"
		}
		if err := s.store.CreateSnapshot(ctx, bk); err != nil {
			t.Fatal(err)
		}
		cur, _ := s.store.GetSandbox(ctx, "", sb.ID)
		cur.State, cur.Reason = sandbox.StateDeleting, reason
		cur, _ = s.store.UpdateSandbox(ctx, cur)
		at := time.Now().Add(-2 * time.Hour)
		cur.State, cur.DeletedAt = sandbox.StateDeleted, &at
		if _, err := s.store.UpdateSandbox(ctx, cur); err != nil {
			t.Fatal(err)
		}
		return cur, bk
	}
	user, userBackup := mk("user_deleted", sandbox.SnapshotReady)
	platform, _ := mk("platform_deleted", sandbox.SnapshotReady)
	platformFailed, _ := mk("platform_deleted", sandbox.SnapshotFailed)
	s.dispose(ctx, time.Now())

	gone := func(id string) bool {
		_, err := s.store.GetSandbox(ctx, "", id)
		return errors.Is(err, store.ErrNotFound)
	}
	if !gone(user.ID) || gone(platform.ID) || !gone(platformFailed.ID) {
		t.Errorf("purged: user %v, platform with a complete backup %v (want kept), platform with a failed backup %v",
			gone(user.ID), gone(platform.ID), gone(platformFailed.ID))
	}
	led, _ := s.store.Ledger(ctx)
	var kinds []string
	for _, e := range led {
		if e.SandboxID == user.ID {
			for _, o := range e.Objects {
				kinds = append(kinds, o.Kind+" "+o.Key)
			}
		}
	}
	want := []string{"snapshot_manifest " + userBackup.ManifestKey, "snapshot_sidecar " + BackupDescriptorKey(userBackup.ID)}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Errorf("ledger objects of the purged sandbox: %v, want %v", kinds, want)
	}
	if l, _ := s.store.ListSnapshots(ctx, store.SnapshotFilter{SandboxID: user.ID}); len(l) != 0 {
		t.Errorf("snapshot records of a purged sandbox: %d", len(l))
	}
	h.mu.Lock()
	removed := len(h.removed)
	h.mu.Unlock()
	if removed != 2 {
		t.Errorf("local snapshot files removed for %d purged sandboxes, want 2", removed)
	}
}

// TestForkBySandboxToken: a sandbox's own token forks its child; the
// copies are the caller's children (all it may see), and it cannot fork
// a sandbox it does not see.
func TestForkBySandboxToken(t *testing.T) {
	s := newSnapService(t, &snapHost{fakeHost: &fakeHost{}}, filepath.Join(t.TempDir(), "db"))
	ctx := context.Background()
	parent := runningSandbox(t, s, "runc")
	child, err := s.Create(ctx, org, CreateRequest{Template: "busybox", ParentID: parent.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.WaitFor(ctx, org, child.ID, sandbox.StateRunning, 5*time.Second); !ok {
		t.Fatal("child never ran")
	}
	scoped := Principal{OrgID: org.OrgID, Role: store.RoleSandbox, SandboxID: parent.ID}
	res, err := s.Fork(ctx, scoped, child.ID, ForkRequest{Count: 1})
	if err != nil || len(res.Sandboxes) != 1 || res.Sandboxes[0].ParentID != parent.ID {
		t.Fatalf("fork by the parent's token = %+v, %v", res, err)
	}
	other := runningSandbox(t, s, "runc")
	if _, err := s.Fork(ctx, scoped, other.ID, ForkRequest{Count: 1}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("fork of an unrelated sandbox by a sandbox token = %v, want not found", err)
	}
	top, err := s.Fork(ctx, org, child.ID, ForkRequest{Count: 1, NoParent: true})
	if err != nil || len(top.Sandboxes) != 1 || top.Sandboxes[0].ParentID != "" {
		t.Errorf("fork with parent false = %+v, %v; want a top-level sandbox", top, err)
	}
}

// TestForkKeepsSSHKeys: a fork is a copy of the machine, so the SSH
// gateway lets the same keys into each copy.
func TestForkKeepsSSHKeys(t *testing.T) {
	s := newSnapService(t, &snapHost{fakeHost: &fakeHost{}}, filepath.Join(t.TempDir(), "db"))
	ctx := context.Background()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, _ := ssh.NewPublicKey(pub)
	key := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp)))
	src, err := s.Create(ctx, org, CreateRequest{Template: "busybox", SSHKeys: []string{key}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.WaitFor(ctx, org, src.ID, sandbox.StateRunning, 5*time.Second); !ok {
		t.Fatal("source never ran")
	}
	res, err := s.Fork(ctx, org, src.ID, ForkRequest{Count: 2})
	if err != nil || len(res.Sandboxes) != 2 {
		t.Fatalf("fork = %+v, %v", res, err)
	}
	for _, f := range res.Sandboxes {
		got, err := s.Get(ctx, org, f.ID, false)
		if err != nil || len(got.SSHKeys) != 1 || got.SSHKeys[0] != key {
			t.Errorf("fork %s ssh keys = %q, %v; want the source's %q", f.ID, got.SSHKeys, err, key)
		}
	}
}

// TestForkMetadata: copies get the source's metadata with the request's
// keys set over it; metadata over create's limits, or a platform key, is
// refused before any snapshot is taken.
func TestForkMetadata(t *testing.T) {
	s := newSnapService(t, &snapHost{fakeHost: &fakeHost{}}, filepath.Join(t.TempDir(), "db"))
	ctx := context.Background()
	src, err := s.Create(ctx, org, CreateRequest{Template: "busybox", Metadata: map[string]string{"team": "a", "made_by": "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.WaitFor(ctx, org, src.ID, sandbox.StateRunning, 5*time.Second); !ok {
		t.Fatal("source never ran")
	}
	res, err := s.Fork(ctx, org, src.ID, ForkRequest{Count: 2, Metadata: map[string]string{"made_by": "bob", "try": "1"}})
	if err != nil || len(res.Sandboxes) != 2 {
		t.Fatalf("fork = %+v, %v", res, err)
	}
	want := map[string]string{"team": "a", "made_by": "bob", "try": "1"}
	for _, f := range res.Sandboxes {
		got, err := s.Get(ctx, org, f.ID, false)
		if err != nil || !maps.Equal(got.Metadata, want) {
			t.Errorf("copy %s metadata %v, %v; want %v", f.ID, got.Metadata, err, want)
		}
	}
	if got, _ := s.Get(ctx, org, src.ID, false); got.Metadata["made_by"] != "alice" {
		t.Errorf("the source's metadata changed: %v", got.Metadata)
	}

	before, _ := s.store.ListSnapshots(ctx, store.SnapshotFilter{SandboxID: src.ID})
	tooMany := map[string]string{}
	for i := range 16 {
		tooMany[fmt.Sprintf("k%d", i)] = "v"
	}
	for name, md := range map[string]map[string]string{
		"17 keys with the source's": tooMany,
		"a platform key":            {store.MetaPoolReady: "1"},
		"last_start":                {LastStartKey: "x"},
	} {
		var fe *sandbox.FieldError
		if _, err := s.Fork(ctx, org, src.ID, ForkRequest{Count: 1, Metadata: md}); !errors.As(err, &fe) || fe.Field != "metadata" {
			t.Errorf("%s: fork = %v, want a metadata field error", name, err)
		}
	}
	after, _ := s.store.ListSnapshots(ctx, store.SnapshotFilter{SandboxID: src.ID})
	for _, a := range after {
		if !slices.ContainsFunc(before, func(b sandbox.Snapshot) bool { return b.ID == a.ID }) {
			t.Errorf("a refused fork left snapshot %s", a.ID)
		}
	}
}

// TestForkKeepsNetworkAndName: a fork's copy keeps the source's egress
// policy (a fork is no way out of a blocked network) and takes the name
// asked for, which names one copy only.
func TestForkKeepsNetworkAndName(t *testing.T) {
	h := &snapHost{fakeHost: &fakeHost{}}
	s := newSnapService(t, h, filepath.Join(t.TempDir(), "db"))
	ctx := context.Background()
	src := runningSandbox(t, s, "runc")
	policy := &sandbox.NetworkPolicy{Egress: sandbox.EgressDeny, AllowOut: []string{"192.0.2.0/24"}}
	if _, err := s.SetNetwork(ctx, org, src.ID, policy); err != nil {
		t.Fatal(err)
	}
	var fe *sandbox.FieldError
	if _, err := s.Fork(ctx, org, src.ID, ForkRequest{Count: 2, Name: "twins"}); !errors.As(err, &fe) || fe.Field != "name" {
		t.Errorf("a name for two copies: %v", err)
	}
	res, err := s.Fork(ctx, org, src.ID, ForkRequest{Count: 1, Name: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, org, res.Sandboxes[0].ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "copy" || got.Network == nil || got.Network.Egress != sandbox.EgressDeny ||
		len(got.Network.AllowOut) != 1 || got.Network.AllowOut[0] != "192.0.2.0/24" {
		t.Errorf("fork: name %q network %+v", got.Name, got.Network)
	}
	if _, err := s.Fork(ctx, org, src.ID, ForkRequest{Count: 1, Name: "copy"}); !errors.Is(err, sandbox.ErrConflict) && !errors.Is(err, sandbox.ErrAlreadyExists) {
		t.Errorf("a second copy named copy: %v", err)
	}
}
