package controlplane

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// TestPlatformDeletionKeepsRecoveryData: the platform's own deletions
// record their cause at the deletion, and final disposal reads it. A
// sandbox with a complete archive deleted by its TTL's expiry is kept (its
// archive too) past the user retention (1 h here) and disposed of after
// the platform recovery retention (3 h here); the same sandbox deleted by
// the user, or by an auto_delete_days timer the customer set, is disposed
// of after the user retention. Before, nothing recorded a deletion as the
// platform's, so the longer keeping never applied.
func TestPlatformDeletionKeepsRecoveryData(t *testing.T) {
	s, st, objs := newDisposalService(t)
	ctx := context.Background()
	archived := func() sandbox.Sandbox {
		sb := running(t, s, CreateRequest{Template: "busybox"})
		key := "manifests/" + sb.ID + ".json"
		if err := objs.Put(ctx, "arch", key, strings.NewReader("{}"), 2); err != nil {
			t.Fatal(err)
		}
		return setRecord(t, s, sb.ID, func(sb *sandbox.Sandbox) {
			sb.Archive = &sandbox.ArchiveRef{Bucket: "arch", ManifestKey: key, Complete: true}
		})
	}
	// The TTL's expiry, through the timers as in production.
	ttl := archived()
	if _, err := s.SetExpiry(ctx, org, ttl.ID, time.Now().Add(-time.Second), sandbox.ExpireDelete); err != nil {
		t.Fatal(err)
	}
	// A DELETE, and the customer's auto-delete timer (a record stopped long ago).
	user := archived()
	if _, err := s.Delete(ctx, org, user.ID); err != nil {
		t.Fatal(err)
	}
	auto := archived()
	s.Stop(ctx, org, auto.ID)
	waitState(t, s, auto.ID, sandbox.StateStopped)
	setRecord(t, s, auto.ID, func(sb *sandbox.Sandbox) {
		old := time.Now().Add(-48 * time.Hour)
		sb.Retention.AutoDeleteDays, sb.StoppedAt = 1, &old
	})
	s.runTimers(ctx)
	want := map[string][2]string{ttl.ID: {"ttl_expired", sandbox.DeletedByPlatform}, user.ID: {"user_deleted", sandbox.DeletedByUser},
		auto.ID: {"auto_deleted", sandbox.DeletedByUser}}
	for id, w := range want {
		got := waitState(t, s, id, sandbox.StateDeleted)
		if got.Reason != w[0] || got.DeletedBy != w[1] {
			t.Errorf("%s: deleted_reason %q by %q, want %q by %q", id, got.Reason, got.DeletedBy, w[0], w[1])
		}
		// Deleted two hours ago: past the user retention, within the platform's.
		setRecord(t, s, id, func(sb *sandbox.Sandbox) { at := time.Now().Add(-2 * time.Hour); sb.DeletedAt = &at })
	}
	s.dispose(ctx, time.Now())
	s.dispose(ctx, time.Now()) // the second pass carries out the queued object deletions
	gone := func(id string) bool { _, err := st.GetSandbox(ctx, "", id); return errors.Is(err, store.ErrNotFound) }
	stored := func(sb sandbox.Sandbox) bool {
		_, err := objs.Stat(ctx, "arch", "manifests/"+sb.ID+".json")
		return !errors.Is(err, objstore.ErrNotFound)
	}
	if gone(ttl.ID) || !stored(ttl) {
		t.Errorf("TTL-expired sandbox with a complete archive: purged %v, archive kept %v; want kept for the platform recovery retention", gone(ttl.ID), stored(ttl))
	}
	for _, sb := range []sandbox.Sandbox{user, auto} {
		if !gone(sb.ID) || stored(sb) {
			t.Errorf("%s (%s): purged %v, archive kept %v; want disposed of after the user retention", sb.ID, want[sb.ID][0], gone(sb.ID), stored(sb))
		}
	}
	s.dispose(ctx, time.Now().Add(2*time.Hour)) // 4 h after the deletion
	if !gone(ttl.ID) {
		t.Error("TTL-expired sandbox kept past the platform recovery retention")
	}
	led, _ := st.Ledger(ctx)
	reasons := map[string]string{}
	for _, l := range led {
		reasons[l.SandboxID] = l.DeletedReason
		if len(l.Objects) != 1 || l.Objects[0].Bucket != "arch" || l.Objects[0].Key != "manifests/"+l.SandboxID+".json" {
			t.Errorf("ledger of %s: %+v", l.SandboxID, l.Objects)
		}
	}
	if reasons[ttl.ID] != "ttl_expired" || reasons[user.ID] != "user_deleted" || reasons[auto.ID] != "auto_deleted" {
		t.Errorf("ledger reasons %v", reasons)
	}
}
