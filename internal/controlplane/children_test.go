package controlplane

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestDeletingAParentNeverDeletesItsChildren: seed 004, "Deleting a
// sandbox never deletes its children." A parent deleted by a timer (which
// does not ask about children) leaves its child running with its link;
// the parent's final disposal only clears the child's parent_id.
func TestDeletingAParentNeverDeletesItsChildren(t *testing.T) {
	h := &fakeHost{}
	s, _ := newTestService(t, h)
	ctx := context.Background()
	parent := running(t, s, CreateRequest{Template: "busybox"})
	child := running(t, s, CreateRequest{Template: "busybox", ParentID: parent.ID})
	if _, err := s.deleteWithReason(ctx, parent.ID, "ttl_expired"); err != nil {
		t.Fatal(err)
	}
	waitDeleted(t, s, parent.ID)
	got, err := s.Get(ctx, org, child.ID, false)
	if err != nil || got.State != sandbox.StateRunning || got.ParentID != parent.ID {
		t.Fatalf("child after its parent's delete: %v %q %v", got.State, got.ParentID, err)
	}
	h.mu.Lock()
	destroyed := slices.Clone(h.destroyed)
	h.mu.Unlock()
	if slices.Contains(destroyed, child.ID) {
		t.Errorf("the parent's teardown destroyed its child: %v", destroyed)
	}
	s.dispose(ctx, time.Now().Add(s.cfg.DeletedRetention+time.Hour))
	if got, err = s.Get(ctx, org, parent.ID, true); err == nil {
		t.Fatalf("parent not purged: %v", got.State)
	}
	got, err = s.Get(ctx, org, child.ID, false)
	if err != nil || got.State != sandbox.StateRunning || got.ParentID != "" {
		t.Errorf("child after its parent's disposal: %v parent %q %v", got.State, got.ParentID, err)
	}
}
