package controlplane

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// lostHost is a host that has lost its sandboxes: none runs, and it has
// the disk of none unless hasDisk says so.
type lostHost struct {
	*fakeHost
	hasDisk atomic.Bool
	starts  atomic.Int32
}

func (h *lostHost) Running(ctx context.Context, id string) bool { return false }
func (h *lostHost) HasDisk(id string) bool                      { return h.hasDisk.Load() }
func (h *lostHost) Start(ctx context.Context, spec StartSpec) (Instance, error) {
	h.starts.Add(1)
	return h.fakeHost.Start(ctx, spec)
}

// TestHostLossDisposal: a sandbox recorded running whose host no longer
// has its disk cannot run again: the reconciler deletes it with reason
// host_lost, a platform deletion (so a complete archive keeps it 90 days),
// and the ledger records the cause. One whose disk is still there is
// booted again.
func TestHostLossDisposal(t *testing.T) {
	h := &lostHost{fakeHost: &fakeHost{}}
	s, st := newServiceWith(t, h, "", nil)
	ctx := context.Background()
	h.hasDisk.Store(true)
	sb := running(t, s, CreateRequest{Template: "busybox"})
	before := h.starts.Load()
	s.ensureRunning(ctx, sb.ID, reasonNotRunning)
	if got, _ := st.GetSandbox(ctx, "", sb.ID); got.State != sandbox.StateRunning || h.starts.Load() != before+1 {
		t.Fatalf("with its disk: %s after %d starts; want booted again, running", got.State, h.starts.Load()-before)
	}

	h.hasDisk.Store(false)
	s.ensureRunning(ctx, sb.ID, reasonNotRunning)
	got := waitState(t, s, sb.ID, sandbox.StateDeleted)
	if got.Reason != "host_lost" || got.DeletedBy != sandbox.DeletedByPlatform {
		t.Fatalf("deleted_reason %q by %q, want host_lost by the platform", got.Reason, got.DeletedBy)
	}
	if h.starts.Load() != before+1 {
		t.Error("a sandbox without its disk was booted")
	}
	setRecord(t, s, sb.ID, func(sb *sandbox.Sandbox) { at := time.Now().Add(-365 * 24 * time.Hour); sb.DeletedAt = &at })
	s.dispose(ctx, time.Now())
	led, _ := st.Ledger(ctx)
	if len(led) != 1 || led[0].DeletedReason != "host_lost" || led[0].DeletedBy != sandbox.DeletedByPlatform {
		t.Errorf("ledger: %+v", led)
	}
}

// TestDeleteOrg: deleting an org is for platform admins; it takes the
// org's tokens at once, its webhooks, and deletes every live sandbox of it
// (a parent with a live child included) as a platform deletion
// (org_deleted): one with a complete archive is kept past the user
// retention, and the ledger records reason and cause. Other orgs are
// untouched.
func TestDeleteOrg(t *testing.T) {
	s, st, objs := newDisposalService(t)
	ctx := context.Background()
	platform := Principal{OrgID: tenancy.DefaultOrgID, Role: store.RoleAdmin}
	o, tok, err := s.tenancy.CreateOrg(ctx, platform, "doomed")
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.tenancy.Authenticate(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateWebhook(ctx, store.Webhook{ID: "whk_1", OrgID: p.OrgID, URL: "https://hooks.example.com/x", Secret: "s"}); err != nil {
		t.Fatal(err)
	}
	mine := func() sandbox.Sandbox {
		sb, err := s.Create(ctx, p, CreateRequest{Template: "busybox"})
		if err != nil {
			t.Fatal(err)
		}
		return waitOrgState(t, s, sb.ID, sandbox.StateRunning)
	}
	archived := mine()
	key := "manifests/" + archived.ID + ".json"
	objs.Put(ctx, "arch", key, strings.NewReader("{}"), 2)
	setRecord(t, s, archived.ID, func(sb *sandbox.Sandbox) {
		sb.Archive = &sandbox.ArchiveRef{Bucket: "arch", ManifestKey: key, Complete: true}
	})
	dad := mine()
	kid, err := s.Create(ctx, p, CreateRequest{Template: "busybox", ParentID: dad.ID})
	if err != nil {
		t.Fatal(err)
	}
	waitOrgState(t, s, kid.ID, sandbox.StateRunning)
	other := running(t, s, CreateRequest{Template: "busybox"}) // org_a

	for _, tc := range []struct {
		name string
		p    Principal
		id   string
		want error
	}{
		{"org admin", p, o.ID, sandbox.ErrForbidden},
		{"member of the platform org", Principal{OrgID: tenancy.DefaultOrgID, Role: store.RoleMember}, o.ID, sandbox.ErrForbidden},
		{"the platform's org", platform, tenancy.DefaultOrgID, sandbox.ErrConflict},
		{"the pool org", platform, PoolOrgID, sandbox.ErrConflict},
		{"unknown", platform, "org_01ARZ3NDEKTSV4RRFFQ69G5FAV", store.ErrNotFound},
	} {
		if _, err := s.DeleteOrg(ctx, tc.p, tc.id); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	d, err := s.DeleteOrg(ctx, platform, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.SandboxesDeleting != 3 || d.Org.ID != o.ID {
		t.Errorf("deletion: %+v, want 3 sandboxes deleting", d)
	}
	if _, err := s.tenancy.Authenticate(ctx, tok); err == nil {
		t.Error("the deleted org's token still authenticates")
	}
	if hooks, _ := st.ListWebhooks(ctx, o.ID); len(hooks) != 0 {
		t.Errorf("webhooks of a deleted org: %d", len(hooks))
	}
	for _, id := range []string{archived.ID, dad.ID, kid.ID} {
		got := waitOrgState(t, s, id, sandbox.StateDeleted)
		if got.Reason != "org_deleted" || got.DeletedBy != sandbox.DeletedByPlatform {
			t.Errorf("%s: deleted_reason %q by %q, want org_deleted by the platform", id, got.Reason, got.DeletedBy)
		}
		setRecord(t, s, id, func(sb *sandbox.Sandbox) { at := time.Now().Add(-2 * time.Hour); sb.DeletedAt = &at })
	}
	if got, _ := st.GetSandbox(ctx, "", other.ID); got.State != sandbox.StateRunning {
		t.Errorf("another org's sandbox: %s", got.State)
	}
	if _, err := s.DeleteOrg(ctx, platform, o.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second deletion: %v, want not found", err)
	}
	s.dispose(ctx, time.Now())
	gone := func(id string) bool { _, err := st.GetSandbox(ctx, "", id); return errors.Is(err, store.ErrNotFound) }
	if gone(archived.ID) || !gone(dad.ID) || !gone(kid.ID) {
		t.Errorf("2 h after: archived purged %v (want kept 3 h), others purged %v %v (want purged)", gone(archived.ID), gone(dad.ID), gone(kid.ID))
	}
	led, _ := st.Ledger(ctx)
	for _, l := range led {
		if l.OrgID != o.ID || l.DeletedReason != "org_deleted" || l.DeletedBy != sandbox.DeletedByPlatform {
			t.Errorf("ledger row %+v", l)
		}
	}
	if len(led) != 2 {
		t.Errorf("ledger has %d rows, want 2", len(led))
	}
}

// waitOrgState is waitState for a sandbox of any org.
func waitOrgState(t *testing.T, s *Service, id string, want sandbox.State) sandbox.Sandbox {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := s.store.GetSandbox(context.Background(), "", id)
		if err == nil && got.State == want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: state %s (reason %q), want %s: %v", id, got.State, got.Reason, want, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
