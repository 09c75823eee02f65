package controlplane

import (
	"context"
	"errors"
	"testing"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestNamesUniqueAmongLiveSandboxesPerOrg: docs/sandboxes.md's rename. A name is
// taken only by a live sandbox of the same org: another org may use it,
// and a deleted (or deleting) sandbox frees it. A refused rename changes
// nothing.
func TestNamesUniqueAmongLiveSandboxesPerOrg(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	first := running(t, s, CreateRequest{Template: "busybox", Name: "ci-runner-2"})
	second := running(t, s, CreateRequest{Template: "busybox", Name: "other"})
	name := "ci-runner-2"
	if _, err := s.Update(ctx, org, second.ID, Patch{Name: &name}); !errors.Is(err, sandbox.ErrConflict) {
		t.Fatalf("rename to a live sandbox's name: %v", err)
	}
	if got, _ := s.Get(ctx, org, second.ID, false); got.Name != "other" {
		t.Errorf("a refused rename changed the name to %q", got.Name)
	}
	orgB := Principal{OrgID: "org_b", Role: org.Role}
	if _, err := s.Create(ctx, orgB, CreateRequest{Template: "busybox", Name: name}); err != nil {
		t.Errorf("the same name in another org: %v", err)
	}
	if _, err := s.Delete(ctx, org, first.ID); err != nil {
		t.Fatal(err)
	}
	// Deleting already frees it; so does deleted.
	if got, err := s.Update(ctx, org, second.ID, Patch{Name: &name}); err != nil || got.Name != name {
		t.Errorf("rename to a deleting sandbox's name: %q %v", got.Name, err)
	}
	waitDeleted(t, s, first.ID)
	if _, err := s.Create(ctx, org, CreateRequest{Template: "busybox", Name: name}); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("create with the name the renamed sandbox holds: %v", err)
	}
}
