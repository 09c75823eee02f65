package controlplane

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// pooledSandbox makes a running, claimable sandbox of a busybox warm pool.
func pooledSandbox(t *testing.T, s *Service, st store.Store) sandbox.Sandbox {
	t.Helper()
	ctx := t.Context()
	if err := st.CreateOrg(ctx, store.Org{ID: PoolOrgID, Name: "warm pools", CreatedAt: time.Now().UTC()}); err != nil && !errors.Is(err, store.ErrConflict) {
		t.Fatal(err)
	}
	pool := Principal{OrgID: PoolOrgID, Role: store.RoleAdmin}
	zero := 0
	sb, err := s.CreatePlatform(ctx, pool, CreateRequest{Template: "busybox", Type: sandbox.TypeEphemeral, AutoStopMinutes: &zero,
		Metadata: map[string]string{store.MetaPool: "busybox"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.WaitFor(ctx, pool, sb.ID, sandbox.StateRunning, 5*time.Second); err != nil || !ok {
		t.Fatalf("pooled sandbox not running: %v", err)
	}
	if ok, err := s.SetPlatformMetadata(ctx, PoolOrgID, sb.ID, store.MetaPoolReady, "1", sandbox.StateRunning); err != nil || !ok {
		t.Fatalf("mark ready: %v %v", ok, err)
	}
	return sb
}

// TestWarmCreate: a create that asks for nothing a boot must apply is
// handed the pool's running sandbox with its own record, once; a create
// whose size differs boots cold and leaves the pool alone; a refused
// claim discards the sandbox rather than returning it to the pool.
func TestWarmCreate(t *testing.T) {
	ctx := context.Background()
	s, st := newTestService(t, &fakeHost{})
	pooled := pooledSandbox(t, s, st)

	ram := 1024
	cold, err := s.Create(ctx, org, CreateRequest{Template: "busybox", RAMMB: &ram})
	if err != nil {
		t.Fatal(err)
	}
	if cold.ID == pooled.ID || cold.Start != sandbox.StartCold || cold.State != sandbox.StateCreating {
		t.Fatalf("a create of another size = %s %s %s, want a cold create", cold.ID, cold.Start, cold.State)
	}

	ttl := int64(60_000)
	warm, err := s.Create(ctx, org, CreateRequest{Template: "busybox", Name: "w1", TTLMs: &ttl,
		Env: map[string]string{"A": "1"}, Metadata: map[string]string{"team": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if warm.ID != pooled.ID || warm.Start != sandbox.StartWarm || warm.State != sandbox.StateRunning || warm.OrgID != org.OrgID ||
		warm.Name != "w1" || warm.Env["A"] != "1" || warm.Metadata["team"] != "x" || len(warm.Metadata) != 1 ||
		warm.ExpiresAt == nil || warm.ProjectID == "" || !warm.CreatedAt.After(pooled.CreatedAt) {
		t.Fatalf("warm create = %+v", warm)
	}
	if got, err := s.Get(ctx, org, warm.ID, false); err != nil || got.Start != sandbox.StartWarm || got.Name != "w1" {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	if _, err := st.GetSandbox(ctx, PoolOrgID, pooled.ID); !store.IsNotFound(err) {
		t.Errorf("the pool still holds the claimed sandbox: %v", err)
	}
	evs, err := st.ListEvents(ctx, store.EventQuery{OrgID: org.OrgID, SandboxID: warm.ID})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if len(types) != 2 || types[0] != store.EventStateChanged || types[1] != "created" {
		t.Errorf("the caller's events = %v, want a state change to running and created", types)
	}

	again, err := s.Create(ctx, org, CreateRequest{Template: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	if again.ID == pooled.ID || again.Start != sandbox.StartCold {
		t.Errorf("the pool's one sandbox was handed out twice: %s %s", again.ID, again.Start)
	}

	t.Run("a taken name discards the claimed sandbox", func(t *testing.T) {
		p2 := pooledSandbox(t, s, st)
		_, err := s.Create(ctx, org, CreateRequest{Template: "busybox", Name: "w1"})
		if !errors.Is(err, sandbox.ErrConflict) {
			t.Fatalf("create under a taken name: %v, want a conflict", err)
		}
		back, err := st.GetSandbox(ctx, PoolOrgID, p2.ID)
		if err != nil || back.Metadata[store.MetaPoolReady] == "1" || (back.State != sandbox.StateDeleting && back.State != sandbox.StateDeleted) {
			t.Errorf("pooled sandbox after a refused claim: %v %+v", err, back)
		}
	})
}
