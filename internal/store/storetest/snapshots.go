package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// testSnapshots pins the snapshot records: round trip, org scoping,
// updates of the mutable fields, filters and order, idempotent delete.
func testSnapshots(t *testing.T, s store.Store) {
	ctx := context.Background()
	mk := func(id, org, sbx string, kind sandbox.SnapshotKind, at time.Time) sandbox.Snapshot {
		return sandbox.Snapshot{
			ID: id, OrgID: org, SandboxID: sbx, Name: "n-" + id, Kind: kind, State: sandbox.SnapshotCreating,
			Memory: kind == sandbox.KindSnapshot, SizeBytes: 1 << 30,
			Source:    sandbox.SnapshotSource{Template: "busybox", TemplateVersionID: "tplv_1", CPU: 1.5, RAMMB: 512, DiskGB: 2, Runtime: "gvisor"},
			HostID:    "host_1",
			DiskImage: "/d/" + id + ".img", MemoryImage: "/d/" + id + "/mem",
			CreatedAt: stored(at), UpdatedAt: stored(at),
		}
	}
	a := mk("snap_a", "org_1", "sbx_1", sandbox.KindSnapshot, base)
	b := mk("snap_b", "org_1", "sbx_1", sandbox.KindSnapshot, base.Add(time.Microsecond))
	c := mk("bkp_c", "org_1", "sbx_2", sandbox.KindBackup, base.Add(2*time.Microsecond))
	d := mk("snap_d", "org_2", "sbx_3", sandbox.KindSnapshot, base.Add(3*time.Microsecond))
	for _, sn := range []sandbox.Snapshot{a, b, c, d} {
		wantErr(t, "CreateSnapshot", s.CreateSnapshot(ctx, sn), nil)
	}
	wantErr(t, "CreateSnapshot(dup)", s.CreateSnapshot(ctx, a), store.ErrConflict)

	got, err := s.GetSnapshot(ctx, "org_1", "snap_a")
	wantErr(t, "GetSnapshot", err, nil)
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("GetSnapshot round trip (-want +got):\n%s", diff)
	}
	_, err = s.GetSnapshot(ctx, "org_2", "snap_a")
	wantErr(t, "GetSnapshot(other org)", err, store.ErrNotFound)
	_, err = s.GetSnapshot(ctx, "", "snap_zzz")
	wantErr(t, "GetSnapshot(absent)", err, store.ErrNotFound)
	if _, err := s.GetSnapshot(ctx, "", "snap_d"); err != nil {
		t.Errorf("GetSnapshot(any org) = %v", err)
	}

	upd := a
	upd.State, upd.SizeBytes, upd.Reason = sandbox.SnapshotReady, 42, "why"
	upd.Bucket, upd.ManifestKey = "bkt", "manifests/x.json"
	upd.OrgID, upd.SandboxID = "org_other", "sbx_other" // never change
	got, err = s.UpdateSnapshot(ctx, upd)
	wantErr(t, "UpdateSnapshot", err, nil)
	want := upd
	want.OrgID, want.SandboxID = a.OrgID, a.SandboxID
	if diff := cmp.Diff(want, got, cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "UpdatedAt" }, cmp.Ignore())); diff != "" {
		t.Errorf("UpdateSnapshot (-want +got):\n%s", diff)
	}
	if !got.UpdatedAt.After(a.UpdatedAt) {
		t.Errorf("UpdatedAt = %v, want after %v", got.UpdatedAt, a.UpdatedAt)
	}
	_, err = s.UpdateSnapshot(ctx, mk("snap_absent", "org_1", "sbx_1", sandbox.KindSnapshot, base))
	wantErr(t, "UpdateSnapshot(absent)", err, store.ErrNotFound)

	ids := func(f store.SnapshotFilter) []string {
		t.Helper()
		l, err := s.ListSnapshots(ctx, f)
		wantErr(t, "ListSnapshots", err, nil)
		return idsOf(l, func(sn *sandbox.Snapshot) string { return sn.ID })
	}
	for _, tc := range []struct {
		name string
		f    store.SnapshotFilter
		want []string
	}{
		{"org", store.SnapshotFilter{OrgID: "org_1"}, []string{"bkp_c", "snap_b", "snap_a"}},
		{"all orgs", store.SnapshotFilter{}, []string{"snap_d", "bkp_c", "snap_b", "snap_a"}},
		{"sandbox", store.SnapshotFilter{OrgID: "org_1", SandboxID: "sbx_1"}, []string{"snap_b", "snap_a"}},
		{"kind", store.SnapshotFilter{OrgID: "org_1", Kind: sandbox.KindBackup}, []string{"bkp_c"}},
		{"state", store.SnapshotFilter{State: sandbox.SnapshotReady}, []string{"snap_a"}},
		{"none", store.SnapshotFilter{OrgID: "org_9"}, []string{}},
	} {
		if diff := cmp.Diff(tc.want, ids(tc.f)); diff != "" {
			t.Errorf("ListSnapshots(%s) (-want +got):\n%s", tc.name, diff)
		}
	}

	wantErr(t, "DeleteSnapshot", s.DeleteSnapshot(ctx, "snap_a"), nil)
	wantErr(t, "DeleteSnapshot(again)", s.DeleteSnapshot(ctx, "snap_a"), nil)
	_, err = s.GetSnapshot(ctx, "", "snap_a")
	wantErr(t, "GetSnapshot(deleted)", err, store.ErrNotFound)
}
