package controlplane

import (
	"context"
	"errors"
	"testing"

	"github.com/platinum-dev/platinum/internal/hostapi"

	"github.com/platinum-dev/platinum/internal/sandbox"
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
