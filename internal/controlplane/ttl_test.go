package controlplane

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// newTTLService is newTestService with busybox as the session template
// and default template, and cfg changes on top.
func newTTLService(t *testing.T, h *fakeHost, change func(*Config)) *Service {
	t.Helper()
	s, st := newServiceWith(t, h, "", func(cfg *Config) {
		cfg.Templates = TemplateConfig{Default: "busybox", SessionTemplates: []string{"busybox"}}
		if change != nil {
			change(cfg)
		}
	})
	for _, o := range []string{"org_a", "org_b"} {
		if err := st.CreateOrg(context.Background(), store.Org{ID: o, Name: o}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func i64(v int64) *int64 { return &v }
func intp(v int) *int    { return &v }

func TestCreateTTL(t *testing.T) {
	s := newTTLService(t, &fakeHost{}, nil)
	tests := []struct {
		name          string
		req           CreateRequest
		wantTTL       time.Duration // 0: no expiry
		wantAutoStop  int
		wantTemplate  string
		wantErr       error
		wantExceeded  bool
		wantErrorText string
	}{
		{name: "session template default", req: CreateRequest{Template: "busybox"}, wantTTL: time.Hour, wantAutoStop: 0, wantTemplate: "busybox"},
		{name: "default template is a session template", req: CreateRequest{}, wantTTL: time.Hour, wantTemplate: "busybox"},
		{name: "explicit ttl", req: CreateRequest{Template: "busybox", TTLMs: i64(600_000)}, wantTTL: 10 * time.Minute, wantTemplate: "busybox"},
		{name: "exactly the create limit", req: CreateRequest{Template: "busybox", TTLMs: i64(3_600_000)}, wantTTL: time.Hour, wantTemplate: "busybox"},
		{name: "over the create limit", req: CreateRequest{Template: "busybox", TTLMs: i64(3_600_001)}, wantExceeded: true},
		{name: "zero", req: CreateRequest{Template: "busybox", TTLMs: i64(0)}, wantErr: sandbox.ErrInvalidArgument},
		{name: "negative", req: CreateRequest{Template: "busybox", TTLMs: i64(-5)}, wantErr: sandbox.ErrInvalidArgument},
		{name: "persistent template keeps its type's retention", req: CreateRequest{Template: "pt-base"}, wantTTL: 0, wantAutoStop: 60, wantTemplate: "pt-base"},
		{name: "retention field opts out of the session default", req: CreateRequest{Template: "busybox", Type: "persistent"}, wantTTL: 0, wantAutoStop: 60, wantTemplate: "busybox"},
		{name: "auto_stop_minutes kept with a ttl", req: CreateRequest{Template: "busybox", TTLMs: i64(60_000), AutoStopMinutes: intp(5)}, wantTTL: time.Minute, wantAutoStop: 5, wantTemplate: "busybox"},
		{name: "ttl on a persistent template", req: CreateRequest{Template: "pt-base", TTLMs: i64(60_000)}, wantTTL: time.Minute, wantAutoStop: 0, wantTemplate: "pt-base"},
		{name: "unknown version", req: CreateRequest{TemplateVersionID: sandbox.NewID(sandbox.PrefixTemplateVersion)}, wantErr: sandbox.ErrNotFound},
		{name: "malformed version", req: CreateRequest{TemplateVersionID: "nope"}, wantErr: sandbox.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now()
			sb, err := s.Create(context.Background(), org, tc.req)
			var te *TTLExceededError
			switch {
			case tc.wantExceeded:
				if !errors.As(err, &te) || te.MaxTTLMs != 3_600_000 {
					t.Fatalf("Create = %v, want TTLExceededError with max 3600000", err)
				}
				return
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Create = %v, want %v", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if sb.Template != tc.wantTemplate {
				t.Errorf("template = %q, want %q", sb.Template, tc.wantTemplate)
			}
			if sb.Retention.AutoStopMinutes != tc.wantAutoStop {
				t.Errorf("auto_stop_minutes = %d, want %d", sb.Retention.AutoStopMinutes, tc.wantAutoStop)
			}
			if tc.wantTTL == 0 {
				if sb.ExpiresAt != nil || sb.TTLMs != 0 {
					t.Errorf("expires_at = %v, ttl_ms = %d; want none", sb.ExpiresAt, sb.TTLMs)
				}
				return
			}
			if sb.TTLMs != tc.wantTTL.Milliseconds() || sb.ExpiresAt == nil || sb.ExpiryAction != sandbox.ExpireDelete {
				t.Fatalf("ttl_ms = %d, expires_at = %v, action %q", sb.TTLMs, sb.ExpiresAt, sb.ExpiryAction)
			}
			if got := sb.ExpiresAt.Sub(sb.CreatedAt); got != tc.wantTTL {
				t.Errorf("expires_at - created_at = %v, want %v", got, tc.wantTTL)
			}
			if sb.CreatedAt.Before(before.Add(-time.Second)) {
				t.Errorf("created_at %v before the request", sb.CreatedAt)
			}
		})
	}
}

func TestSetTTL(t *testing.T) {
	s := newTTLService(t, &fakeHost{}, nil)
	ctx := context.Background()
	sb, err := s.Create(ctx, org, CreateRequest{Template: "busybox", TTLMs: i64(60_000)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.WaitFor(ctx, org, sb.ID, sandbox.StateRunning, 5*time.Second); !ok {
		t.Fatal("never running")
	}
	t.Run("resets from now", func(t *testing.T) {
		before := time.Now()
		got, err := s.SetTTL(ctx, org, sb.ID, 2*3_600_000)
		if err != nil {
			t.Fatal(err)
		}
		if got.TTLMs != 7_200_000 || got.ExpiresAt.Before(before.Add(2*time.Hour-time.Millisecond)) || got.ExpiresAt.After(time.Now().Add(2*time.Hour)) {
			t.Errorf("ttl_ms %d expires_at %v, want 2h from the request", got.TTLMs, got.ExpiresAt)
		}
		if got.Status != sandbox.StatusReady {
			t.Errorf("status = %s, want ready", got.Status)
		}
	})
	t.Run("up to 24 hours since creation", func(t *testing.T) {
		left := sb.CreatedAt.Add(24 * time.Hour).Sub(time.Now())
		if _, err := s.SetTTL(ctx, org, sb.ID, (left - time.Minute).Milliseconds()); err != nil {
			t.Errorf("inside the session: %v", err)
		}
		_, err := s.SetTTL(ctx, org, sb.ID, (left + time.Minute).Milliseconds())
		var te *TTLExceededError
		if !errors.As(err, &te) || te.Limit != "session" || te.MaxTTLMs > left.Milliseconds() || te.MaxTTLMs < (left-time.Minute).Milliseconds() {
			t.Errorf("past the session = %v (%+v), want TTLExceededError with max ≈ %d", err, te, left.Milliseconds())
		}
	})
	t.Run("invalid", func(t *testing.T) {
		for _, ms := range []int64{0, -1} {
			if _, err := s.SetTTL(ctx, org, sb.ID, ms); !errors.Is(err, sandbox.ErrInvalidArgument) {
				t.Errorf("SetTTL(%d) = %v, want invalid argument", ms, err)
			}
		}
	})
	t.Run("expiring in the last minute", func(t *testing.T) {
		got, err := s.SetTTL(ctx, org, sb.ID, 30_000)
		if err != nil || got.Status != sandbox.StatusExpiring {
			t.Errorf("status = %s (%v), want expiring", got.Status, err)
		}
	})
	t.Run("other org", func(t *testing.T) {
		if _, err := s.SetTTL(ctx, Principal{OrgID: "org_b"}, sb.ID, 1000); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("SetTTL from another org = %v, want not found", err)
		}
	})
	t.Run("destroyed", func(t *testing.T) {
		if _, err := s.Kill(ctx, org, sb.ID); err != nil {
			t.Fatal(err)
		}
		var de *DestroyedError
		if _, err := s.SetTTL(ctx, org, sb.ID, 1000); !errors.As(err, &de) {
			t.Errorf("SetTTL on a killed sandbox = %v, want DestroyedError", err)
		}
		waitDeleted(t, s, sb.ID)
		if _, err := s.SetTTL(ctx, org, sb.ID, 1000); !errors.As(err, &de) {
			t.Errorf("SetTTL on a deleted sandbox = %v, want DestroyedError", err)
		}
	})
}

func TestKillIdempotent(t *testing.T) {
	s := newTTLService(t, &fakeHost{}, nil)
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox"})
	for i := range 2 {
		got, err := s.Kill(ctx, org, sb.ID)
		if err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		if got.Status != sandbox.StatusDestroyed || got.Reason != "user_killed" {
			t.Errorf("kill %d: status %s reason %q, want destroyed user_killed", i, got.Status, got.Reason)
		}
	}
	waitDeleted(t, s, sb.ID)
	got, err := s.Kill(ctx, org, sb.ID)
	if err != nil || got.State != sandbox.StateDeleted || got.Reason != "user_killed" || got.Status != sandbox.StatusDestroyed {
		t.Errorf("kill after deleted = %s %q %s %v, want the deleted record", got.State, got.Reason, got.Status, err)
	}
	if _, err := s.Kill(ctx, Principal{OrgID: "org_b"}, sb.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("kill from another org = %v, want not found", err)
	}
	// A sandbox deleted for another reason keeps it.
	other, _ := s.Create(ctx, org, CreateRequest{Template: "busybox"})
	s.WaitFor(ctx, org, other.ID, sandbox.StateRunning, 5*time.Second)
	if _, err := s.Delete(ctx, org, other.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Kill(ctx, org, other.ID); err != nil || got.Reason != "user_deleted" {
		t.Errorf("kill of a deleted sandbox = %q %v, want its record (user_deleted)", got.Reason, err)
	}
}

func TestTTLExpiryDestroys(t *testing.T) {
	s := newTTLService(t, &fakeHost{}, func(c *Config) { c.TimerInterval = 20 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.RunTimers(ctx)
	sb, err := s.Create(ctx, org, CreateRequest{Template: "busybox", TTLMs: i64(300)})
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.WaitFor(ctx, org, sb.ID, sandbox.StateDeleted, 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("never deleted: %v %v", got.State, err)
	}
	if got.Reason != "ttl_expired" || got.Status != sandbox.StatusDestroyed {
		t.Errorf("reason %q status %s, want ttl_expired destroyed", got.Reason, got.Status)
	}
}

func TestListExcludesDestroyedAndFailed(t *testing.T) {
	h := &fakeHost{}
	s := newTTLService(t, h, nil)
	ctx := context.Background()
	live, _ := s.Create(ctx, org, CreateRequest{Template: "busybox"})
	s.WaitFor(ctx, org, live.ID, sandbox.StateRunning, 5*time.Second)
	killed, _ := s.Create(ctx, org, CreateRequest{Template: "busybox"})
	s.WaitFor(ctx, org, killed.ID, sandbox.StateRunning, 5*time.Second)
	if _, err := s.Kill(ctx, org, killed.ID); err != nil {
		t.Fatal(err)
	}
	waitDeleted(t, s, killed.ID)
	h.StartFunc = func(ctx context.Context, spec StartSpec) (Instance, error) { return Instance{}, errors.New("boom") }
	failed, _ := s.Create(ctx, org, CreateRequest{Template: "busybox"})
	s.WaitFor(ctx, org, failed.ID, sandbox.StateRunning, 5*time.Second)
	h.StartFunc = nil

	tests := []struct {
		include []string
		state   sandbox.State
		want    []string
		wantErr bool
	}{
		{want: []string{live.ID}},
		{include: []string{"failed"}, want: []string{failed.ID, live.ID}},
		{include: []string{"destroyed"}, want: []string{killed.ID, live.ID}},
		{include: []string{"destroyed", "failed"}, want: []string{failed.ID, killed.ID, live.ID}},
		{state: sandbox.StateFailed, want: []string{failed.ID}},
		{include: []string{"running"}, wantErr: true},
	}
	for _, tc := range tests {
		rows, total, err := s.List(ctx, org, ListRequest{Include: tc.include, State: tc.state})
		if tc.wantErr {
			if !errors.Is(err, sandbox.ErrInvalidArgument) {
				t.Errorf("include %v: %v, want invalid argument", tc.include, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
			if r.Status == "" {
				t.Errorf("list row %s has no status", r.ID)
			}
		}
		if len(ids) != len(tc.want) || total != len(tc.want) {
			t.Errorf("include %v state %q: %v (total %d), want %v", tc.include, tc.state, ids, total, tc.want)
			continue
		}
		for i := range ids {
			if ids[i] != tc.want[i] {
				t.Errorf("include %v: %v, want %v", tc.include, ids, tc.want)
				break
			}
		}
	}
}

func TestStatusRunningWhileCommandInFlight(t *testing.T) {
	s := newTTLService(t, &fakeHost{}, nil)
	ctx := context.Background()
	sb, _ := s.Create(ctx, org, CreateRequest{Template: "busybox"})
	s.WaitFor(ctx, org, sb.ID, sandbox.StateRunning, 5*time.Second)
	get := func() sandbox.Status {
		got, err := s.Get(ctx, org, sb.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		return got.Status
	}
	if st := get(); st != sandbox.StatusReady {
		t.Errorf("status = %s, want ready", st)
	}
	done := s.busy.Start(sb.ID)
	if st := get(); st != sandbox.StatusRunning {
		t.Errorf("status with a command in flight = %s, want running", st)
	}
	done()
	done() // idempotent
	if st := get(); st != sandbox.StatusReady {
		t.Errorf("status after the command = %s, want ready", st)
	}
}

func TestTemplateVersionsPinAndRebuild(t *testing.T) {
	s := newTTLService(t, &fakeHost{}, nil)
	ctx := context.Background()
	first := running(t, s, CreateRequest{Template: "busybox"})
	v1 := first.TemplateVersionID
	if first.TemplateVersion != 1 {
		t.Errorf("first sandbox template_version = %d, want 1", first.TemplateVersion)
	}
	v2, err := s.NewTemplateVersion(ctx, "busybox")
	if err != nil {
		t.Fatal(err)
	}
	if v2.ID == v1 || v2.Number != 2 {
		t.Fatalf("new version %s #%d, want a second version", v2.ID, v2.Number)
	}
	// Wait for the build to finish.
	deadline := time.Now().Add(5 * time.Second)
	for {
		vs, _ := s.TemplateVersions(ctx, "busybox")
		if len(vs) == 2 && vs[0].ID == v2.ID && vs[0].Status == "ready" && vs[1].ID == v1 && vs[1].Number == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("versions = %+v", vs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got, _ := s.Get(ctx, org, first.ID, false); got.TemplateVersionID != v1 {
		t.Errorf("running sandbox moved to %s, want it to keep %s", got.TemplateVersionID, v1)
	}
	fresh, _ := s.Create(ctx, org, CreateRequest{Template: "busybox"})
	fresh, _, _ = s.WaitFor(ctx, org, fresh.ID, sandbox.StateRunning, 5*time.Second)
	if fresh.TemplateVersionID != v2.ID || fresh.TemplateVersion != 2 {
		t.Errorf("new create got %s (#%d), want %s", fresh.TemplateVersionID, fresh.TemplateVersion, v2.ID)
	}
	pinned, err := s.Create(ctx, org, CreateRequest{TemplateVersionID: v1})
	if err != nil {
		t.Fatal(err)
	}
	if pinned.Template != "busybox" || pinned.TemplateVersionID != v1 {
		t.Errorf("pinned create = %s %s, want busybox %s", pinned.Template, pinned.TemplateVersionID, v1)
	}
	pinned, _, _ = s.WaitFor(ctx, org, pinned.ID, sandbox.StateRunning, 5*time.Second)
	if pinned.TemplateVersionID != v1 {
		t.Errorf("pinned sandbox runs %s, want %s", pinned.TemplateVersionID, v1)
	}
	if _, err := s.Create(ctx, org, CreateRequest{Template: "pt-base", TemplateVersionID: v1}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("pin of another slug's version = %v, want invalid argument", err)
	}
	if _, err := s.TemplateVersions(ctx, "nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("versions of an unknown slug = %v, want not found", err)
	}
}

// A create that boots for longer than IdleAfter (a busy host) is ready
// when it runs, not idle: idle time counts from running, as after a start.
func TestStatusReadyAfterSlowCreate(t *testing.T) {
	const idleAfter = 200 * time.Millisecond
	s := newTTLService(t, &fakeHost{StartFunc: func(ctx context.Context, spec StartSpec) (Instance, error) {
		time.Sleep(2 * idleAfter)
		return Instance{Address: "127.0.0.1"}, nil
	}}, func(cfg *Config) { cfg.TTL.IdleAfter = idleAfter })
	ctx := context.Background()
	sb, err := s.Create(ctx, org, CreateRequest{Template: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.WaitFor(ctx, org, sb.ID, sandbox.StateRunning, 5*time.Second)
	if err != nil || !ok {
		t.Fatalf("wait: %v %v", ok, err)
	}
	if got.Status != sandbox.StatusReady {
		t.Fatalf("status right after a slow create = %s, want ready", got.Status)
	}
}
