package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

func testProjects(t *testing.T, s store.Store) {
	ctx := t.Context()
	org, other := sandbox.NewID(sandbox.PrefixOrg), sandbox.NewID(sandbox.PrefixOrg)
	for _, o := range []string{org, other} {
		wantErr(t, "CreateOrg", s.CreateOrg(ctx, store.Org{ID: o, Name: o}), nil)
	}
	def := store.Project{ID: sandbox.NewID(sandbox.PrefixProject), OrgID: org, Name: "default", Default: true, CreatedAt: base}
	ml := store.Project{ID: sandbox.NewID(sandbox.PrefixProject), OrgID: org, Name: "ml", CreatedAt: base.Add(time.Microsecond)}
	wantErr(t, "CreateProject default", s.CreateProject(ctx, def), nil)
	wantErr(t, "CreateProject ml", s.CreateProject(ctx, ml), nil)

	conflicts := []struct {
		name string
		p    store.Project
	}{
		{"same id", store.Project{ID: ml.ID, OrgID: org, Name: "x"}},
		{"same name in org", store.Project{ID: sandbox.NewID(sandbox.PrefixProject), OrgID: org, Name: "ml"}},
		{"second default", store.Project{ID: sandbox.NewID(sandbox.PrefixProject), OrgID: org, Name: "d2", Default: true}},
	}
	for _, tc := range conflicts {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, "CreateProject", s.CreateProject(ctx, tc.p), store.ErrConflict)
		})
	}
	t.Run("same name in another org", func(t *testing.T) {
		wantErr(t, "CreateProject", s.CreateProject(ctx, store.Project{ID: sandbox.NewID(sandbox.PrefixProject), OrgID: other, Name: "ml"}), nil)
	})

	gets := []struct {
		name    string
		org, id string
		want    store.Project
		wantErr error
	}{
		{"present", org, ml.ID, store.Project{ID: ml.ID, OrgID: org, Name: "ml", CreatedAt: stored(ml.CreatedAt)}, nil},
		{"other org", other, ml.ID, store.Project{}, store.ErrNotFound},
		{"absent", org, sandbox.NewID(sandbox.PrefixProject), store.Project{}, store.ErrNotFound},
	}
	for _, tc := range gets {
		t.Run("get "+tc.name, func(t *testing.T) {
			got, err := s.GetProject(ctx, tc.org, tc.id)
			wantRead(t, "GetProject", err, tc.wantErr, tc.want, got)
		})
	}

	got, err := s.DefaultProject(ctx, org)
	wantErr(t, "DefaultProject", err, nil)
	if got.ID != def.ID || !got.Default {
		t.Errorf("DefaultProject = %+v, want %s", got, def.ID)
	}
	_, err = s.DefaultProject(ctx, other)
	wantErr(t, "DefaultProject of an org without one", err, store.ErrNotFound)

	list, err := s.ListProjects(ctx, org)
	wantErr(t, "ListProjects", err, nil)
	if diff := cmp.Diff([]string{def.ID, ml.ID}, projectIDs(list)); diff != "" {
		t.Errorf("ListProjects order (-want +got):\n%s", diff)
	}

	t.Run("project token", func(t *testing.T) {
		tok := store.Token{ID: sandbox.NewID(sandbox.PrefixToken), OrgID: org, Role: store.RoleMember, Hash: "h-" + ml.ID, ProjectID: ml.ID, CreatedAt: base}
		wantErr(t, "CreateToken", s.CreateToken(ctx, tok), nil)
		got, err := s.TokenByHash(ctx, tok.Hash)
		wantErr(t, "TokenByHash", err, nil)
		if got.ProjectID != ml.ID {
			t.Errorf("token ProjectID = %q, want %s", got.ProjectID, ml.ID)
		}
	})

	t.Run("assign and filter", func(t *testing.T) {
		old := newSandbox(org, base) // made before projects: no project
		inML := newSandbox(org, base.Add(time.Millisecond))
		inML.ProjectID = ml.ID
		elsewhere := newSandbox(other, base)
		for _, sb := range []sandbox.Sandbox{old, inML, elsewhere} {
			mustCreate(t, s, sb)
		}
		n, err := s.AssignProject(ctx, org, def.ID)
		wantErr(t, "AssignProject", err, nil)
		if n != 1 {
			t.Errorf("AssignProject moved %d sandboxes, want 1", n)
		}
		for id, want := range map[string]string{old.ID: def.ID, inML.ID: ml.ID} {
			sb, err := s.GetSandbox(ctx, org, id)
			wantErr(t, "GetSandbox", err, nil)
			if sb.ProjectID != want {
				t.Errorf("%s: ProjectID = %q, want %q", id, sb.ProjectID, want)
			}
		}
		rows, total, err := s.ListSandboxes(ctx, store.ListOptions{OrgID: org, ProjectID: ml.ID})
		wantErr(t, "ListSandboxes", err, nil)
		if diff := cmp.Diff([]string{inML.ID}, ids(rows)); diff != "" || total != 1 {
			t.Errorf("ListSandboxes by project: total %d (-want +got):\n%s", total, diff)
		}
	})
}

func projectIDs(ps []store.Project) []string {
	return idsOf(ps, func(p *store.Project) string { return p.ID })
}

func testOrgQuotasAndUsage(t *testing.T, s store.Store) {
	ctx := t.Context()
	org := sandbox.NewID(sandbox.PrefixOrg)
	wantErr(t, "CreateOrg", s.CreateOrg(ctx, store.Org{ID: org, Name: "q"}), nil)

	q, err := s.OrgQuotas(ctx, org)
	wantErr(t, "OrgQuotas", err, nil)
	if diff := cmp.Diff(store.OrgQuotas{}, q); diff != "" {
		t.Errorf("fresh org has overrides (-want +got):\n%s", diff)
	}
	set := store.OrgQuotas{MaxSandboxes: ptr(3), MaxCPU: ptr(2.5), MaxRAMMB: ptr(0)}
	wantErr(t, "SetOrgQuotas", s.SetOrgQuotas(ctx, org, set), nil)
	q, err = s.OrgQuotas(ctx, org)
	wantErr(t, "OrgQuotas", err, nil)
	if diff := cmp.Diff(set, q); diff != "" {
		t.Errorf("OrgQuotas round trip (-want +got):\n%s", diff)
	}
	missing := sandbox.NewID(sandbox.PrefixOrg)
	wantErr(t, "SetOrgQuotas of a missing org", s.SetOrgQuotas(ctx, missing, set), store.ErrNotFound)
	_, err = s.OrgQuotas(ctx, missing)
	wantErr(t, "OrgQuotas of a missing org", err, store.ErrNotFound)

	orgs, err := s.ListOrgs(ctx)
	wantErr(t, "ListOrgs", err, nil)
	found := false
	for _, o := range orgs {
		found = found || o.ID == org
	}
	if !found {
		t.Errorf("ListOrgs misses %s", org)
	}

	for i, st := range []sandbox.State{sandbox.StateCreating, sandbox.StateRunning, sandbox.StateStopped} {
		sb := newSandbox(org, base.Add(time.Duration(i)*time.Millisecond))
		sb.State, sb.CPU, sb.RAMMB = st, float64(i+1), 100*(i+1)
		mustCreate(t, s, sb)
	}
	mustCreate(t, s, newSandbox(sandbox.NewID(sandbox.PrefixOrg), base)) // another org's
	tests := []struct {
		name   string
		states []sandbox.State
		want   store.Usage
	}{
		{"active", []sandbox.State{sandbox.StateCreating, sandbox.StateRunning}, store.Usage{Sandboxes: 2, CPU: 3, RAMMB: 300}},
		{"stopped", []sandbox.State{sandbox.StateStopped}, store.Usage{Sandboxes: 1, CPU: 3, RAMMB: 300}},
		{"none match", []sandbox.State{sandbox.StateDeleted}, store.Usage{}},
		{"no states", nil, store.Usage{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.OrgUsage(ctx, org, tc.states...)
			wantRead(t, "OrgUsage", err, nil, tc.want, got)
		})
	}
}

func testIdempotencyKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := base
	rec := func(scope, key, claim string) store.IdempotencyRecord {
		return store.IdempotencyRecord{Scope: scope, Key: key, RequestHash: "h-" + key, Claim: claim,
			CreatedAt: now, LockedUntil: now.Add(time.Minute), ExpiresAt: now.Add(24 * time.Hour)}
	}
	first := rec("tok_a", "k1", "c1")
	held, claimed, err := s.ClaimIdempotencyKey(ctx, first, now)
	wantErr(t, "Claim", err, nil)
	if !claimed || held.Claim != "c1" || held.Done {
		t.Fatalf("first claim: claimed %v, held %+v", claimed, held)
	}
	held, claimed, err = s.ClaimIdempotencyKey(ctx, rec("tok_a", "k1", "c2"), now)
	wantErr(t, "Claim again", err, nil)
	if claimed || held.Claim != "c1" {
		t.Fatalf("second claim of a held key: claimed %v, held %+v", claimed, held)
	}
	// Another scope's same key is another record.
	if _, claimed, err := s.ClaimIdempotencyKey(ctx, rec("tok_b", "k1", "c3"), now); err != nil || !claimed {
		t.Fatalf("same key, other scope: claimed %v, err %v", claimed, err)
	}

	done := first
	done.Status, done.Header, done.Body = 201, map[string][]string{"Content-Type": {"application/json"}}, []byte(`{"id":"x"}`)
	wrong := done
	wrong.Claim = "not-mine"
	wantErr(t, "Finish with another claim", s.FinishIdempotencyKey(ctx, wrong), store.ErrNotFound)
	wantErr(t, "Finish", s.FinishIdempotencyKey(ctx, done), nil)
	wantErr(t, "Finish twice", s.FinishIdempotencyKey(ctx, done), store.ErrNotFound)
	got, err := s.GetIdempotencyKey(ctx, "tok_a", "k1")
	wantErr(t, "Get", err, nil)
	want := done
	want.Done, want.CreatedAt, want.LockedUntil, want.ExpiresAt = true, stored(now), stored(now.Add(time.Minute)), stored(now.Add(24*time.Hour))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("finished record (-want +got):\n%s", diff)
	}
	// A finished record holds past its lock, until it expires.
	if _, claimed, _ := s.ClaimIdempotencyKey(ctx, rec("tok_a", "k1", "c4"), now.Add(time.Hour)); claimed {
		t.Error("a finished, unexpired record was claimed again")
	}
	if held, claimed, _ := s.ClaimIdempotencyKey(ctx, rec("tok_a", "k1", "c5"), now.Add(25*time.Hour)); !claimed || held.Claim != "c5" {
		t.Errorf("an expired record was not replaced: claimed %v, held %+v", claimed, held)
	}

	// An abandoned claim (lock ran out) is replaced; a released one is gone.
	wantErr(t, "Claim k2", func() error { _, _, err := s.ClaimIdempotencyKey(ctx, rec("tok_a", "k2", "c6"), now); return err }(), nil)
	if held, claimed, _ := s.ClaimIdempotencyKey(ctx, rec("tok_a", "k2", "c7"), now.Add(2*time.Minute)); !claimed || held.Claim != "c7" {
		t.Errorf("an abandoned claim was not replaced: claimed %v, held %+v", claimed, held)
	}
	wantErr(t, "Release with an old claim", s.ReleaseIdempotencyKey(ctx, "tok_a", "k2", "c6"), nil)
	if _, err := s.GetIdempotencyKey(ctx, "tok_a", "k2"); err != nil {
		t.Errorf("releasing an old claim removed the new one: %v", err)
	}
	wantErr(t, "Release", s.ReleaseIdempotencyKey(ctx, "tok_a", "k2", "c7"), nil)
	_, err = s.GetIdempotencyKey(ctx, "tok_a", "k2")
	wantErr(t, "Get released", err, store.ErrNotFound)

	n, err := s.PurgeIdempotencyKeys(ctx, now.Add(48*time.Hour))
	wantErr(t, "Purge", err, nil)
	if n != 2 { // tok_a/k1 (c5) and tok_b/k1
		t.Errorf("Purge removed %d records, want 2", n)
	}
	_, err = s.GetIdempotencyKey(ctx, "tok_b", "k1")
	wantErr(t, "Get purged", err, store.ErrNotFound)
}
