package controlplane

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestDeletingAParentNeverDeletesItsChildren: deleting a sandbox never
// deletes its children (docs/sandboxes.md). A parent deleted by a timer (which
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
	destroyed := h.Destroyed()
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

// TestTreeQuotaRAMAndResize: a tree's ram is bounded at create like its
// count and cpu, and a resize of a member cannot take the tree past its
// cpu or ram either (a child created small would otherwise escape).
func TestTreeQuotaRAMAndResize(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	s.cfg.TreeMaxCPU, s.cfg.TreeMaxRAMMB = 4, 2048
	root := running(t, s, CreateRequest{Template: "busybox", CPU: ptr(1.0), RAMMB: ptr(1024)})
	var qe *sandbox.QuotaError
	if _, err := s.Create(ctx, org, CreateRequest{Template: "busybox", ParentID: root.ID, RAMMB: ptr(1536)}); !errors.As(err, &qe) || qe.Limit != "ram_mb" || qe.Scope != "tree" {
		t.Fatalf("ram over the tree limit at create: %v", err)
	}
	child := running(t, s, CreateRequest{Template: "busybox", ParentID: root.ID, CPU: ptr(1.0), RAMMB: ptr(512)})
	alone := running(t, s, CreateRequest{Template: "busybox", CPU: ptr(1.0), RAMMB: ptr(512)})
	for _, tc := range []struct {
		name  string
		id    string
		req   ResizeRequest
		limit string // "" = allowed
	}{
		{"child ram past the tree", child.ID, ResizeRequest{RAMMB: ptr(1536)}, "ram_mb"},
		{"child cpu past the tree", child.ID, ResizeRequest{CPU: ptr(4.0)}, "cpu"},
		{"parent ram past the tree", root.ID, ResizeRequest{RAMMB: ptr(2048)}, "ram_mb"},
		{"child within the tree", child.ID, ResizeRequest{CPU: ptr(3.0), RAMMB: ptr(1024)}, ""},
		{"child shrinks", child.ID, ResizeRequest{CPU: ptr(1.0)}, ""},
		{"top-level sandbox without children", alone.ID, ResizeRequest{CPU: ptr(8.0), RAMMB: ptr(4096)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := s.Get(ctx, org, tc.id, false)
			_, err := s.Resize(ctx, org, tc.id, tc.req)
			after, _ := s.Get(ctx, org, tc.id, false)
			if tc.limit == "" {
				if err != nil {
					t.Fatalf("resize: %v", err)
				}
				return
			}
			if !errors.As(err, &qe) || qe.Limit != tc.limit || qe.Scope != "tree" {
				t.Fatalf("err = %v, want a tree %s quota error", err, tc.limit)
			}
			if after.CPU != before.CPU || after.RAMMB != before.RAMMB {
				t.Errorf("a refused resize changed the size: %v/%d → %v/%d", before.CPU, before.RAMMB, after.CPU, after.RAMMB)
			}
		})
	}
}
