package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// newSandbox returns a fully populated sandbox record in org, created at at.
func newSandbox(org string, at time.Time) sandbox.Sandbox {
	id := sandbox.NewID(sandbox.PrefixSandbox)
	return sandbox.Sandbox{
		ID:                id,
		OrgID:             org,
		Name:              "sb-" + strings.ToLower(id[len(id)-8:]),
		State:             sandbox.StateCreating,
		Template:          "busybox",
		TemplateVersionID: "tplv_01JNDX3V6Z9Q6N1S9Y8K7C2F3A",
		CPU:               1.5,
		RAMMB:             512,
		DiskGB:            2,
		Env:               map[string]string{"FOO": "bar"},
		Metadata:          map[string]string{"owner": "ci"},
		HostID:            "host_01JNDX3V6Z9Q6N1S9Y8K7C2F3B",
		Address:           "100.64.0.2",
		AgentToken:        "agent-secret",
		ExpiresAt:         ptr(at.Add(time.Hour)),
		ExpiryAction:      sandbox.ExpireDelete,
		TTLMs:             3_600_000,
		GPUs:              2,
		GPUModel:          "A100",
		Start:             sandbox.StartCold,
		Version:           1,
		CreatedAt:         at,
		UpdatedAt:         at,
	}
}

// mustCreate creates sb and returns it as the store now holds it.
func mustCreate(t *testing.T, s store.Store, sb sandbox.Sandbox) sandbox.Sandbox {
	t.Helper()
	if err := s.CreateSandbox(t.Context(), sb); err != nil {
		t.Fatalf("CreateSandbox %s: %v", sb.ID, err)
	}
	got, err := s.GetSandbox(t.Context(), sb.OrgID, sb.ID)
	if err != nil {
		t.Fatalf("GetSandbox %s: %v", sb.ID, err)
	}
	return got
}

func testCreateGetSandbox(t *testing.T, s store.Store) {
	ctx := t.Context()
	sb := newSandbox("org_a", base)
	deleted := base.Add(time.Second)
	sb.DeletedAt = &deleted
	sb.State = sandbox.StateDeleted
	sb.Reason = "deleted by user"
	wantErr(t, "CreateSandbox", s.CreateSandbox(ctx, sb), nil)

	tests := []struct {
		name    string
		org, id string
		wantErr error
	}{
		{"own org", "org_a", sb.ID, nil},
		{"any org", "", sb.ID, nil},
		{"other org", "org_b", sb.ID, store.ErrNotFound},
		{"absent", "org_a", sandbox.NewID(sandbox.PrefixSandbox), store.ErrNotFound},
		{"absent any org", "", sandbox.NewID(sandbox.PrefixSandbox), store.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.GetSandbox(ctx, tc.org, tc.id)
			wantErr(t, "GetSandbox", err, tc.wantErr)
			want := sandbox.Sandbox{}
			if tc.wantErr == nil {
				want = sb
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("GetSandbox (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("duplicate id", func(t *testing.T) {
		dup := newSandbox("org_b", base.Add(time.Minute))
		dup.ID = sb.ID
		wantErr(t, "CreateSandbox duplicate", s.CreateSandbox(ctx, dup), store.ErrConflict)
		got, err := s.GetSandbox(ctx, "", sb.ID)
		wantErr(t, "GetSandbox", err, nil)
		if diff := cmp.Diff(sb, got); diff != "" {
			t.Errorf("refused create changed the record (-want +got):\n%s", diff)
		}
	})
}

func testCreateSandboxDefaults(t *testing.T, s store.Store) {
	ctx := t.Context()
	tests := []struct {
		name   string
		modify func(*sandbox.Sandbox)
		// check gets the time just before the create.
		check func(t *testing.T, before time.Time, got sandbox.Sandbox)
	}{
		{
			name:   "version forced to 1",
			modify: func(sb *sandbox.Sandbox) { sb.Version = 42 },
			check: func(t *testing.T, _ time.Time, got sandbox.Sandbox) {
				if got.Version != 1 {
					t.Errorf("Version = %d, want 1", got.Version)
				}
			},
		},
		{
			name:   "zero version",
			modify: func(sb *sandbox.Sandbox) { sb.Version = 0 },
			check: func(t *testing.T, _ time.Time, got sandbox.Sandbox) {
				if got.Version != 1 {
					t.Errorf("Version = %d, want 1", got.Version)
				}
			},
		},
		{
			name:   "zero UpdatedAt is CreatedAt",
			modify: func(sb *sandbox.Sandbox) { sb.UpdatedAt = time.Time{} },
			check: func(t *testing.T, _ time.Time, got sandbox.Sandbox) {
				if !got.CreatedAt.Equal(base) || !got.UpdatedAt.Equal(base) {
					t.Errorf("CreatedAt %v UpdatedAt %v, want both %v", got.CreatedAt, got.UpdatedAt, base)
				}
			},
		},
		{
			name:   "zero times are now",
			modify: func(sb *sandbox.Sandbox) { sb.CreatedAt, sb.UpdatedAt = time.Time{}, time.Time{} },
			check: func(t *testing.T, before time.Time, got sandbox.Sandbox) {
				if got.CreatedAt.Before(stored(before)) {
					t.Errorf("CreatedAt = %v, want now (>= %v)", got.CreatedAt, stored(before))
				}
				if !got.UpdatedAt.Equal(got.CreatedAt) {
					t.Errorf("UpdatedAt = %v, want CreatedAt %v", got.UpdatedAt, got.CreatedAt)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSandbox("org_a", base)
			tc.modify(&sb)
			before := time.Now()
			if err := s.CreateSandbox(ctx, sb); err != nil {
				t.Fatalf("CreateSandbox: %v", err)
			}
			got, err := s.GetSandbox(ctx, "org_a", sb.ID)
			wantErr(t, "GetSandbox", err, nil)
			tc.check(t, before, got)
		})
	}
}

func testSandboxMaps(t *testing.T, s store.Store) {
	ctx := t.Context()
	tests := []struct {
		name          string
		env, metadata map[string]string
	}{
		{"nil", nil, nil},
		{"empty", map[string]string{}, map[string]string{}},
		{"values", map[string]string{"PATH": "/usr/bin:/bin", "EMPTY": ""}, map[string]string{"team": "ml"}},
		{"awkward", map[string]string{"Q": `"quoted" \ back`, "NL": "a\nb", "U": "héllo 世界 \u2028"}, map[string]string{"k=v": "{}", "": "empty key"}},
	}
	nonNil := func(m map[string]string) map[string]string {
		if m == nil {
			return map[string]string{}
		}
		return m
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSandbox("org_a", base)
			sb.Env, sb.Metadata = tc.env, tc.metadata
			got := mustCreate(t, s, sb)
			check := func(when string, got sandbox.Sandbox) {
				t.Helper()
				if got.Env == nil || got.Metadata == nil {
					t.Errorf("%s: nil map: Env=%#v Metadata=%#v", when, got.Env, got.Metadata)
				}
				if diff := cmp.Diff(nonNil(tc.env), got.Env); diff != "" {
					t.Errorf("%s: Env (-want +got):\n%s", when, diff)
				}
				if diff := cmp.Diff(nonNil(tc.metadata), got.Metadata); diff != "" {
					t.Errorf("%s: Metadata (-want +got):\n%s", when, diff)
				}
			}
			check("create", got)

			upd := got
			upd.Env, upd.Metadata = tc.env, tc.metadata
			out, err := s.UpdateSandbox(ctx, upd)
			wantErr(t, "UpdateSandbox", err, nil)
			check("update result", out)
			got, err = s.GetSandbox(ctx, "", sb.ID)
			wantErr(t, "GetSandbox", err, nil)
			check("get after update", got)

			rows, _, err := s.ListSandboxes(ctx, store.ListOptions{OrgID: "org_a"})
			wantErr(t, "ListSandboxes", err, nil)
			for _, r := range rows {
				if r.ID == sb.ID {
					check("list", r)
				}
			}
		})
	}
}

func testSandboxTimes(t *testing.T, s store.Store) {
	ctx := t.Context()
	east := time.FixedZone("UTC+5:30", 5*3600+1800)
	tests := []struct {
		name    string
		created time.Time
		deleted *time.Time
	}{
		{"nanoseconds truncated", base.Add(1999 * time.Nanosecond), nil},
		{"other zone", time.Date(2025, 12, 31, 23, 59, 59, 999_999_999, east), nil},
		{"whole second", time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), nil},
		{"deleted at", base.Add(7 * time.Microsecond), ptr(time.Date(2026, 1, 1, 0, 0, 0, 1_234_567, east))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSandbox("org_a", tc.created)
			sb.DeletedAt = tc.deleted
			got := mustCreate(t, s, sb)
			if !got.CreatedAt.Equal(stored(tc.created)) || got.CreatedAt.Location() != time.UTC {
				t.Errorf("CreatedAt = %v, want %v in UTC", got.CreatedAt, stored(tc.created))
			}
			if !got.UpdatedAt.Equal(stored(tc.created)) {
				t.Errorf("UpdatedAt = %v, want %v", got.UpdatedAt, stored(tc.created))
			}
			switch {
			case tc.deleted == nil && got.DeletedAt != nil:
				t.Errorf("DeletedAt = %v, want nil", got.DeletedAt)
			case tc.deleted != nil && (got.DeletedAt == nil || !got.DeletedAt.Equal(stored(*tc.deleted))):
				t.Errorf("DeletedAt = %v, want %v", got.DeletedAt, stored(*tc.deleted))
			}
			// A record read back and written again is unchanged: equal
			// times survive a second round trip exactly.
			again, err := s.GetSandbox(ctx, "", sb.ID)
			wantErr(t, "GetSandbox", err, nil)
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("second read differs (-first +second):\n%s", diff)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func testUpdateSandbox(t *testing.T, s store.Store) {
	ctx := t.Context()
	tests := []struct {
		name    string
		modify  func(*sandbox.Sandbox)
		wantErr error
		// want adjusts the expected stored record (besides version and
		// UpdatedAt, which are always checked).
		want func(orig sandbox.Sandbox, upd *sandbox.Sandbox)
	}{
		{
			name: "every mutable field",
			modify: func(sb *sandbox.Sandbox) {
				sb.Name = "renamed"
				sb.State = sandbox.StateRunning
				sb.Template = "pt-base"
				sb.TemplateVersionID = "tplv_01JNDX3V6Z9Q6N1S9Y8K7C2F3Z"
				sb.CPU = 0.25
				sb.RAMMB = 2048
				sb.DiskGB = 10
				sb.Env = map[string]string{"A": "1"}
				sb.Metadata = nil
				sb.HostID = "host_other"
				sb.Address = "100.64.0.9"
				sb.AgentToken = "rotated"
				sb.Reason = "started"
				sb.DeletedAt = ptr(base.Add(time.Hour))
			},
			want: func(_ sandbox.Sandbox, upd *sandbox.Sandbox) { upd.Metadata = map[string]string{} },
		},
		{
			name: "immutable fields ignored",
			modify: func(sb *sandbox.Sandbox) {
				sb.CreatedAt = base.Add(-time.Hour)
				sb.UpdatedAt = base.Add(-time.Hour)
			},
			want: func(orig sandbox.Sandbox, upd *sandbox.Sandbox) { upd.CreatedAt = orig.CreatedAt },
		},
		{
			name:   "clear deleted at",
			modify: func(sb *sandbox.Sandbox) { sb.DeletedAt = nil },
		},
		{
			name:   "empty org matches",
			modify: func(sb *sandbox.Sandbox) { sb.OrgID = "" },
			want:   func(orig sandbox.Sandbox, upd *sandbox.Sandbox) { upd.OrgID = orig.OrgID },
		},
		{name: "stale version", modify: func(sb *sandbox.Sandbox) { sb.Version-- }, wantErr: store.ErrConflict},
		{name: "future version", modify: func(sb *sandbox.Sandbox) { sb.Version++ }, wantErr: store.ErrConflict},
		{name: "zero version", modify: func(sb *sandbox.Sandbox) { sb.Version = 0 }, wantErr: store.ErrConflict},
		{name: "other org", modify: func(sb *sandbox.Sandbox) { sb.OrgID = "org_b" }, wantErr: store.ErrNotFound},
		{name: "absent", modify: func(sb *sandbox.Sandbox) { sb.ID = sandbox.NewID(sandbox.PrefixSandbox) }, wantErr: store.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSandbox("org_a", base)
			sb.DeletedAt = ptr(base.Add(time.Minute))
			orig := mustCreate(t, s, sb)
			// One successful update first, so the record is at version 2 and
			// "stale" and "zero" are different cases.
			orig, err := s.UpdateSandbox(ctx, orig)
			wantErr(t, "UpdateSandbox", err, nil)

			upd := orig
			tc.modify(&upd)
			before := stored(time.Now())
			got, err := s.UpdateSandbox(ctx, upd)
			wantErr(t, "UpdateSandbox", err, tc.wantErr)
			after, gerr := s.GetSandbox(ctx, "", orig.ID)
			wantErr(t, "GetSandbox", gerr, nil)

			if tc.wantErr != nil {
				if diff := cmp.Diff(sandbox.Sandbox{}, got); diff != "" {
					t.Errorf("failed update returned a record:\n%s", diff)
				}
				if diff := cmp.Diff(orig, after); diff != "" {
					t.Errorf("failed update changed the record (-want +got):\n%s", diff)
				}
				return
			}

			if got.Version != orig.Version+1 {
				t.Errorf("Version = %d, want %d", got.Version, orig.Version+1)
			}
			if got.UpdatedAt.Before(before) {
				t.Errorf("UpdatedAt = %v, want now (>= %v)", got.UpdatedAt, before)
			}
			want := upd
			want.Version = got.Version
			want.UpdatedAt = got.UpdatedAt
			want.CreatedAt = stored(want.CreatedAt)
			if want.DeletedAt != nil {
				want.DeletedAt = ptr(stored(*want.DeletedAt))
			}
			if tc.want != nil {
				tc.want(orig, &want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("UpdateSandbox result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(got, after); diff != "" {
				t.Errorf("GetSandbox differs from UpdateSandbox result (-update +get):\n%s", diff)
			}
		})
	}
}

// eventsFor returns the events of one sandbox, oldest first.
func eventsFor(t *testing.T, s store.Store, id string) []store.Event {
	t.Helper()
	all, err := s.Events(t.Context(), 0, 0)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	var out []store.Event
	for _, e := range all {
		if e.SandboxID == id {
			out = append(out, e)
		}
	}
	return out
}

func decodeChange(t *testing.T, e store.Event) store.StateChange {
	t.Helper()
	var c store.StateChange
	if err := json.Unmarshal([]byte(e.Data), &c); err != nil {
		t.Fatalf("event %d data %q: %v", e.ID, e.Data, err)
	}
	return c
}

func testUpdateSandboxEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	type change struct {
		state  sandbox.State
		reason string
		name   string
	}
	tests := []struct {
		name    string
		changes []change
		want    []store.StateChange
	}{
		{
			name:    "no state change, no event",
			changes: []change{{sandbox.StateCreating, "", "renamed"}, {sandbox.StateCreating, "still creating", "again"}},
		},
		{
			name:    "one change",
			changes: []change{{sandbox.StateStarting, "", ""}},
			want:    []store.StateChange{{From: sandbox.StateCreating, To: sandbox.StateStarting}},
		},
		{
			name: "changes with reasons, interleaved with non-changes",
			changes: []change{
				{sandbox.StateStarting, "", ""},
				{sandbox.StateStarting, "", "rename only"},
				{sandbox.StateRunning, "", ""},
				{sandbox.StateFailed, "agent did not answer", ""},
				{sandbox.StateFailed, "agent did not answer (retried)", ""},
				{sandbox.StateDeleted, "deleted by user", ""},
			},
			want: []store.StateChange{
				{From: sandbox.StateCreating, To: sandbox.StateStarting},
				{From: sandbox.StateStarting, To: sandbox.StateRunning},
				{From: sandbox.StateRunning, To: sandbox.StateFailed, Reason: "agent did not answer"},
				{From: sandbox.StateFailed, To: sandbox.StateDeleted, Reason: "deleted by user"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := mustCreate(t, s, newSandbox("org_e", base))
			if evs := eventsFor(t, s, sb.ID); len(evs) != 0 {
				t.Fatalf("events after create: %+v", evs)
			}
			for _, c := range tc.changes {
				sb.State, sb.Reason = c.state, c.reason
				if c.name != "" {
					sb.Name = c.name
				}
				var err error
				if sb, err = s.UpdateSandbox(ctx, sb); err != nil {
					t.Fatalf("UpdateSandbox: %v", err)
				}
			}
			// A refused update writes no event either.
			stale := sb
			stale.Version--
			stale.State = sandbox.StateArchived
			if _, err := s.UpdateSandbox(ctx, stale); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("stale UpdateSandbox: %v, want ErrConflict", err)
			}

			evs := eventsFor(t, s, sb.ID)
			var got []store.StateChange
			for i, e := range evs {
				if e.Type != store.EventStateChanged || e.OrgID != "org_e" || e.CreatedAt.IsZero() {
					t.Errorf("event %d = %+v, want type %q, org org_e, a time", i, e, store.EventStateChanged)
				}
				if i > 0 && e.ID <= evs[i-1].ID {
					t.Errorf("event %d has id %d, not after event %d's id %d", i, e.ID, i-1, evs[i-1].ID)
				}
				got = append(got, decodeChange(t, e))
			}
			if diff := cmp.Diff(tc.want, got, diffOpts...); diff != "" {
				t.Errorf("state_changed events (-want +got):\n%s", diff)
			}
		})
	}
}

func testUpdateFromSameRead(t *testing.T, s store.Store) {
	ctx := t.Context()
	orig := mustCreate(t, s, newSandbox("org_a", base))
	a, b := orig, orig
	a.Name, a.State = "a", sandbox.StateStarting
	b.Name, b.State = "b", sandbox.StateFailed

	won, err := s.UpdateSandbox(ctx, a)
	wantErr(t, "first UpdateSandbox", err, nil)
	_, err = s.UpdateSandbox(ctx, b)
	wantErr(t, "second UpdateSandbox from the same read", err, store.ErrConflict)

	got, err := s.GetSandbox(ctx, "org_a", orig.ID)
	wantErr(t, "GetSandbox", err, nil)
	if diff := cmp.Diff(won, got); diff != "" {
		t.Errorf("stored record is not the winner's (-winner +stored):\n%s", diff)
	}
	if got.Name != "a" || got.Version != 2 {
		t.Errorf("stored name %q version %d, want a, 2", got.Name, got.Version)
	}
	if evs := eventsFor(t, s, orig.ID); len(evs) != 1 || decodeChange(t, evs[0]).To != sandbox.StateStarting {
		t.Errorf("events = %+v, want one change to starting", evs)
	}

	// The loser re-reads and retries: now it succeeds.
	b = got
	b.Name, b.State = "b", sandbox.StateFailed
	got, err = s.UpdateSandbox(ctx, b)
	wantErr(t, "retried UpdateSandbox", err, nil)
	if got.Version != 3 || got.Name != "b" {
		t.Errorf("after retry: name %q version %d, want b, 3", got.Name, got.Version)
	}
}
