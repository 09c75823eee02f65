package controlplane

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// TestProjectScoping: sandboxes land in the default project unless a
// create names one; a project token sees and creates only in its project,
// and everything else is not found.
func TestProjectScoping(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	admin := Principal{OrgID: "org_a", Role: store.RoleAdmin, TokenID: "tok_admin"}
	other := Principal{OrgID: "org_b", Role: store.RoleAdmin, TokenID: "tok_b"}

	ml, err := s.tenancy.CreateProject(ctx, admin, "ml")
	if err != nil {
		t.Fatal(err)
	}
	otherPrj, err := s.tenancy.CreateProject(ctx, other, "ml")
	if err != nil {
		t.Fatal(err)
	}
	def, err := s.tenancy.DefaultProject(ctx, admin.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	inDefault, err := s.Create(ctx, admin, CreateRequest{Template: "busybox"})
	if err != nil || inDefault.ProjectID != def.ID {
		t.Fatalf("create without project: %q %v, want the default %s", inDefault.ProjectID, err, def.ID)
	}
	inML, err := s.Create(ctx, admin, CreateRequest{Template: "busybox", ProjectID: ml.ID})
	if err != nil || inML.ProjectID != ml.ID {
		t.Fatalf("create in ml: %q %v", inML.ProjectID, err)
	}

	tok, _, err := s.tenancy.CreateToken(ctx, admin, tenancy.TokenRequest{ProjectID: ml.ID})
	if err != nil {
		t.Fatal(err)
	}
	scoped := Principal{OrgID: admin.OrgID, Role: tok.Role, TokenID: tok.ID, ProjectID: tok.ProjectID}

	creates := []struct {
		name    string
		p       Principal
		project string
		want    string // project the sandbox lands in; "" = not found
	}{
		{"unknown project", admin, "prj_01JNDX3V6Z9Q6N1S9Y8K7C2F3A", ""},
		{"malformed project", admin, "ml", ""},
		{"another org's project", admin, otherPrj.ID, ""},
		{"project token, no project", scoped, "", ml.ID},
		{"project token, its project", scoped, ml.ID, ml.ID},
		{"project token, another project", scoped, def.ID, ""},
	}
	for _, tc := range creates {
		t.Run("create "+tc.name, func(t *testing.T) {
			sb, err := s.Create(ctx, tc.p, CreateRequest{Template: "busybox", ProjectID: tc.project})
			if tc.want == "" {
				var nf interface{ Field() string }
				if !errors.Is(err, sandbox.ErrNotFound) || !errors.As(err, &nf) || nf.Field() != "project_id" {
					t.Fatalf("err = %v, want not found naming project_id", err)
				}
				return
			}
			if err != nil || sb.ProjectID != tc.want {
				t.Fatalf("= %q %v, want %s", sb.ProjectID, err, tc.want)
			}
		})
	}

	t.Run("project token reads", func(t *testing.T) {
		if _, err := s.Get(ctx, scoped, inDefault.ID, false); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("get a default-project sandbox = %v, want not found", err)
		}
		if _, err := s.Get(ctx, scoped, inML.ID, false); err != nil {
			t.Errorf("get its own project's sandbox: %v", err)
		}
		if _, err := s.Delete(ctx, scoped, inDefault.ID); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("delete a default-project sandbox = %v, want not found", err)
		}
		rows, _, err := s.List(ctx, scoped, ListRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range rows {
			if sb.ProjectID != ml.ID {
				t.Errorf("project token lists %s of project %s", sb.ID, sb.ProjectID)
			}
		}
		if len(rows) != 3 {
			t.Errorf("project token lists %d sandboxes, want 3", len(rows))
		}
		rows, _, _ = s.List(ctx, scoped, ListRequest{ProjectID: def.ID})
		if len(rows) != 0 {
			t.Errorf("project token filtering another project lists %d", len(rows))
		}
		ps, _ := s.tenancy.ListProjects(ctx, scoped)
		if len(ps) != 1 || ps[0].ID != ml.ID {
			t.Errorf("project token lists projects %v", ps)
		}
		if _, err := s.tenancy.GetProject(ctx, scoped, def.ID); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("project token gets another project = %v", err)
		}
	})

	t.Run("list filter", func(t *testing.T) {
		rows, total, err := s.List(ctx, admin, ListRequest{ProjectID: def.ID})
		if err != nil || total != 1 || rows[0].ID != inDefault.ID {
			t.Errorf("filter by the default project: %d %v", total, err)
		}
	})

	t.Run("forbidden", func(t *testing.T) {
		member, _, err := s.tenancy.CreateToken(ctx, admin, tenancy.TokenRequest{})
		if err != nil || member.Role != store.RoleMember {
			t.Fatalf("member token: %+v %v", member, err)
		}
		mp := Principal{OrgID: admin.OrgID, Role: store.RoleMember, TokenID: member.ID}
		sbx := Principal{OrgID: admin.OrgID, Role: store.RoleSandbox, TokenID: "tok_s", SandboxID: inDefault.ID}
		calls := []struct {
			name string
			call func() error
		}{
			{"member creates a project", func() error { _, err := s.tenancy.CreateProject(ctx, mp, "x"); return err }},
			{"member creates a token", func() error { _, _, err := s.tenancy.CreateToken(ctx, mp, tenancy.TokenRequest{}); return err }},
			{"project token creates a token", func() error { _, _, err := s.tenancy.CreateToken(ctx, scoped, tenancy.TokenRequest{}); return err }},
			{"sandbox token creates a project", func() error { _, err := s.tenancy.CreateProject(ctx, sbx, "x"); return err }},
			{"org admin sets quotas", func() error { _, err := s.tenancy.SetOrgQuota(ctx, admin, admin.OrgID, store.OrgQuotas{}); return err }},
		}
		for _, c := range calls {
			if err := c.call(); !errors.Is(err, sandbox.ErrForbidden) {
				t.Errorf("%s = %v, want forbidden", c.name, err)
			}
		}
	})

	t.Run("token validation", func(t *testing.T) {
		for _, r := range []tenancy.TokenRequest{{Role: "owner"}, {Role: store.RoleAdmin, ProjectID: ml.ID}} {
			if _, _, err := s.tenancy.CreateToken(ctx, admin, r); !errors.Is(err, sandbox.ErrInvalidArgument) {
				t.Errorf("token %+v = %v, want invalid", r, err)
			}
		}
		if _, _, err := s.tenancy.CreateToken(ctx, admin, tenancy.TokenRequest{ProjectID: otherPrj.ID}); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("token for another org's project = %v, want not found", err)
		}
	})
}

// TestDefaultProjectBackfill: sandboxes made before projects existed move
// into their org's default project at start-up (Bootstrap).
func TestDefaultProjectBackfill(t *testing.T) {
	s, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	if err := st.CreateOrg(ctx, store.Org{ID: "org_old", Name: "old"}); err != nil {
		t.Fatal(err)
	}
	old := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: "org_old", State: sandbox.StateStopped, Template: "busybox", CPU: 1, RAMMB: 512, DiskGB: 1}
	if err := st.CreateSandbox(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.tenancy.Bootstrap(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	def, err := st.DefaultProject(ctx, "org_old")
	if err != nil || def.Name != tenancy.DefaultProjectName {
		t.Fatalf("default project: %+v %v", def, err)
	}
	got, _ := st.GetSandbox(ctx, "", old.ID)
	if got.ProjectID != def.ID {
		t.Errorf("old sandbox project = %q, want %s", got.ProjectID, def.ID)
	}
	if _, err := st.DefaultProject(ctx, tenancy.DefaultOrgID); err != nil {
		t.Errorf("the default org has no default project: %v", err)
	}
}

// TestMetadataLimits: docs/sandboxes.md's metadata limits, each named in the refusal.
func TestMetadataLimits(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	keys := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m["k"+strings.Repeat("x", i)] = "v"
		}
		return m
	}
	tests := []struct {
		name    string
		md      map[string]string
		wantErr string // substring of the message; "" = accepted
	}{
		{"none", nil, ""},
		{"16 keys", keys(16), ""},
		{"17 keys", keys(17), "at most 16 keys"},
		{"key of 64", map[string]string{strings.Repeat("k", 64): "v"}, ""},
		{"key of 65", map[string]string{strings.Repeat("k", 65): "v"}, "64 characters"},
		{"empty key", map[string]string{"": "v"}, "64 characters"},
		{"value of 512", map[string]string{"k": strings.Repeat("v", 512)}, ""},
		{"value of 513", map[string]string{"k": strings.Repeat("v", 513)}, "512 characters"},
		{"4 KB total", map[string]string{"a": strings.Repeat("v", 511), "b": strings.Repeat("v", 511), "c": strings.Repeat("v", 511),
			"d": strings.Repeat("v", 511), "e": strings.Repeat("v", 511), "f": strings.Repeat("v", 511), "g": strings.Repeat("v", 511), "h": strings.Repeat("v", 511)}, ""},
		{"over 4 KB total", map[string]string{"a": strings.Repeat("v", 512), "b": strings.Repeat("v", 512), "c": strings.Repeat("v", 512),
			"d": strings.Repeat("v", 512), "e": strings.Repeat("v", 512), "f": strings.Repeat("v", 512), "g": strings.Repeat("v", 512), "h": strings.Repeat("v", 512)}, "4 KB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Create(context.Background(), org, CreateRequest{Template: "busybox", Metadata: tc.md})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var fe *sandbox.FieldError
			if !errors.As(err, &fe) || fe.Field != "metadata" || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want a metadata FieldError naming %q", err, tc.wantErr)
			}
		})
	}
}

// TestOrgQuotas: an org's active sandboxes are bounded in count, cpu and
// ram; stopped ones do not count; a start over the limit is refused;
// overrides beat the server defaults.
func TestOrgQuotas(t *testing.T) {
	type step struct {
		op      string // create; stop and start act on the first sandbox
		cpu     float64
		ram     int
		wantErr string // sandbox.QuotaError.Limit; "" = allowed
	}
	tests := []struct {
		name      string
		cfg       func(*tenancy.Config)
		overrides *store.OrgQuotas
		steps     []step
	}{
		{name: "count", cfg: func(c *tenancy.Config) { c.OrgMaxSandboxes = 2 }, steps: []step{
			{op: "create"}, {op: "create"}, {op: "create", wantErr: "sandboxes"}}},
		{name: "cpu", cfg: func(c *tenancy.Config) { c.OrgMaxCPU = 3 }, steps: []step{
			{op: "create", cpu: 2}, {op: "create", cpu: 1}, {op: "create", cpu: 0.5, wantErr: "cpu"}}},
		{name: "ram", cfg: func(c *tenancy.Config) { c.OrgMaxRAMMB = 1024 }, steps: []step{
			{op: "create", ram: 512}, {op: "create", ram: 1024, wantErr: "ram_mb"}, {op: "create", ram: 512}}},
		{name: "stopped do not count, starting does", cfg: func(c *tenancy.Config) { c.OrgMaxSandboxes = 1 }, steps: []step{
			{op: "create"}, {op: "stop"}, {op: "create"}, {op: "start", wantErr: "sandboxes"}}},
		{name: "override beats default", cfg: func(c *tenancy.Config) { c.OrgMaxSandboxes = 1 }, overrides: &store.OrgQuotas{MaxSandboxes: ptr(3)}, steps: []step{
			{op: "create"}, {op: "create"}, {op: "create"}, {op: "create", wantErr: "sandboxes"}}},
		{name: "override 0 disables", cfg: func(c *tenancy.Config) { c.OrgMaxSandboxes = 1 }, overrides: &store.OrgQuotas{MaxSandboxes: ptr(0)}, steps: []step{
			{op: "create"}, {op: "create"}, {op: "create"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, st := newTestService(t, &fakeHost{})
			setOrgDefaults(s, st, tc.cfg)
			ctx := context.Background()
			if err := st.CreateOrg(ctx, store.Org{ID: org.OrgID, Name: "a"}); err != nil {
				t.Fatal(err)
			}
			if tc.overrides != nil {
				if err := st.SetOrgQuotas(ctx, org.OrgID, *tc.overrides); err != nil {
					t.Fatal(err)
				}
			}
			var first string // stop and start act on the first sandbox
			for i, sp := range tc.steps {
				var err error
				switch sp.op {
				case "create":
					r := CreateRequest{Template: "busybox"}
					if sp.cpu > 0 {
						r.CPU = &sp.cpu
					}
					if sp.ram > 0 {
						r.RAMMB = &sp.ram
					}
					var sb sandbox.Sandbox
					if sb, err = s.Create(ctx, org, r); err == nil {
						if first == "" {
							first = sb.ID
						}
						_, _, err = s.WaitFor(ctx, org, sb.ID, sandbox.StateRunning, 5*time.Second)
					}
				case "stop":
					if _, err = s.StopDiskOnly(ctx, org, first); err == nil {
						_, _, err = s.WaitFor(ctx, org, first, sandbox.StateStopped, 5*time.Second)
					}
				case "start":
					_, err = s.Start(ctx, org, first)
				}
				var qe *sandbox.QuotaError
				switch {
				case sp.wantErr == "" && err != nil:
					t.Fatalf("step %d %s: %v", i, sp.op, err)
				case sp.wantErr != "" && (!errors.As(err, &qe) || qe.Limit != sp.wantErr || qe.Scope != "org"):
					t.Fatalf("step %d %s: err = %v, want an org quota error on %s", i, sp.op, err, sp.wantErr)
				}
			}
		})
	}
}

// TestPatchMetadataAndRetention: a patch replaces the whole metadata map
// and the lifecycle timers (the compatibility surfaces' label and timer
// updates), within the create limits; a refused patch changes nothing.
func TestPatchMetadataAndRetention(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	sb, err := s.Create(ctx, org, CreateRequest{Template: "busybox", Metadata: map[string]string{"a": "1", "b": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]string{"c": "3"}
	ret := sandbox.Retention{Type: sandbox.TypeEphemeral, AutoStopMinutes: 5}
	got, err := s.Update(ctx, org, sb.ID, Patch{Metadata: &md, Retention: &ret})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Metadata) != 1 || got.Metadata["c"] != "3" || got.Retention != ret {
		t.Fatalf("after patch: metadata %v retention %+v", got.Metadata, got.Retention)
	}
	big := map[string]string{}
	for i := range 17 {
		big[strings.Repeat("k", i+1)] = "v"
	}
	bad := sandbox.Retention{Type: "forever"}
	for _, pt := range []Patch{{Metadata: &big}, {Retention: &bad}, {Retention: &sandbox.Retention{AutoStopMinutes: -1}}} {
		var fe *sandbox.FieldError
		if _, err := s.Update(ctx, org, sb.ID, pt); !errors.As(err, &fe) {
			t.Errorf("patch %+v: err = %v, want a FieldError", pt, err)
		}
	}
	now, _ := s.Get(ctx, org, sb.ID, false)
	if len(now.Metadata) != 1 || now.Retention != ret {
		t.Errorf("refused patches changed the sandbox: %v %+v", now.Metadata, now.Retention)
	}
}
