package storetest

import (
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

func newSession(org, vault, workflow string) store.Session {
	return store.Session{
		ID: sandbox.NewID(sandbox.PrefixSession), OrgID: org, VaultID: vault, WorkflowID: workflow,
		Template: "busybox", Status: store.SessionProvisioning,
	}
}

// testSessions pins the live-session rule (one per context), context
// lookups, compare-and-swap updates and the kind-of-ID lookup.
func testSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	org := sandbox.NewID(sandbox.PrefixOrg)
	a := newSession(org, "v1", "wf-1")
	wantErr(t, "CreateSession", s.CreateSession(ctx, a), nil)

	t.Run("second live session of a context conflicts", func(t *testing.T) {
		wantErr(t, "CreateSession", s.CreateSession(ctx, newSession(org, "v1", "wf-1")), store.ErrConflict)
	})
	t.Run("other contexts and orgs do not", func(t *testing.T) {
		for _, ses := range []store.Session{
			newSession(org, "v2", "wf-1"),
			newSession(sandbox.NewID(sandbox.PrefixOrg), "v1", "wf-1"),
			{ID: sandbox.NewID(sandbox.PrefixSession), OrgID: org, VaultID: "v1", AgentSessionID: "wf-1", Template: "busybox", Status: store.SessionProvisioning},
		} {
			wantErr(t, "CreateSession", s.CreateSession(ctx, ses), nil)
		}
	})
	t.Run("get is org-scoped", func(t *testing.T) {
		got, err := s.GetSession(ctx, org, a.ID)
		wantErr(t, "GetSession", err, nil)
		if got.Version != 1 || got.Status != store.SessionProvisioning || got.WorkflowID != "wf-1" {
			t.Errorf("GetSession = %+v", got)
		}
		_, err = s.GetSession(ctx, sandbox.NewID(sandbox.PrefixOrg), a.ID)
		wantErr(t, "GetSession other org", err, store.ErrNotFound)
	})
	t.Run("update is compare-and-swap", func(t *testing.T) {
		cur, _ := s.GetSession(ctx, org, a.ID)
		now := time.Now().UTC().Truncate(time.Microsecond)
		cur.Status, cur.SandboxID, cur.ReadyAt = store.SessionReady, "sbx_x", &now
		got, err := s.UpdateSession(ctx, cur)
		wantErr(t, "UpdateSession", err, nil)
		if got.Version != 2 || got.Status != store.SessionReady || got.SandboxID != "sbx_x" || !got.ReadyAt.Equal(now) {
			t.Errorf("UpdateSession = %+v", got)
		}
		_, err = s.UpdateSession(ctx, cur) // stale version
		wantErr(t, "UpdateSession stale", err, store.ErrConflict)
	})
	t.Run("ended session frees its context", func(t *testing.T) {
		cur, _ := s.GetSession(ctx, org, a.ID)
		cur.Status = store.SessionStopped
		if _, err := s.UpdateSession(ctx, cur); err != nil {
			t.Fatal(err)
		}
		b := newSession(org, "v1", "wf-1")
		wantErr(t, "CreateSession after stop", s.CreateSession(ctx, b), nil)
		got, err := s.ContextSession(ctx, org, "v1", "wf-1", "")
		wantErr(t, "ContextSession", err, nil)
		if got.ID != b.ID {
			t.Errorf("ContextSession = %s, want the live one %s", got.ID, b.ID)
		}
		_, err = s.ContextSession(ctx, org, "v9", "wf-1", "")
		wantErr(t, "ContextSession absent", err, store.ErrNotFound)
		byID, err := s.SessionsByContextID(ctx, org, "wf-1")
		wantErr(t, "SessionsByContextID", err, nil)
		if len(byID) != 4 { // a, b, v2's, and the agent-session one
			t.Errorf("SessionsByContextID = %d sessions, want 4", len(byID))
		}
		live, _ := s.ListSessions(ctx, org, false)
		all, _ := s.ListSessions(ctx, org, true)
		if len(live) != 3 || len(all) != 4 {
			t.Errorf("ListSessions: %d live, %d all; want 3, 4", len(live), len(all))
		}
		stopped, _ := s.SessionsInStatuses(ctx, store.SessionStopped)
		if len(stopped) != 1 || stopped[0].ID != a.ID {
			t.Errorf("SessionsInStatuses(stopped) = %v", stopped)
		}
	})
}

// testClaimPool pins the warm-pool claim: only ready pooled sandboxes of
// the template's default-class pool (never another class's), never the
// same one twice, and the sandbox moves org.
func testClaimPool(t *testing.T, s store.Store) {
	ctx := t.Context()
	pool, org := sandbox.NewID(sandbox.PrefixOrg), sandbox.NewID(sandbox.PrefixOrg)
	var ready []string
	for i, meta := range []map[string]string{
		{store.MetaPool: "busybox", store.MetaPoolReady: "1"},
		{store.MetaPool: "busybox", store.MetaPoolReady: "1"},
		{store.MetaPool: "busybox", store.MetaPoolReady: "1"},
		{store.MetaPool: "busybox"},                                                    // not ready yet
		{store.MetaPool: store.PoolKey("busybox", "gvisor"), store.MetaPoolReady: "1"}, // another class's pool
	} {
		sb := newSandbox(pool, base.Add(time.Duration(i)*time.Second))
		sb.Name, sb.State, sb.Metadata = "", sandbox.StateRunning, meta
		wantErr(t, "CreateSandbox", s.CreateSandbox(ctx, sb), nil)
		wantErr(t, "CreateToken", s.CreateToken(ctx, store.Token{ID: sandbox.NewID(sandbox.PrefixToken), OrgID: pool,
			Role: store.RoleSandbox, Hash: sb.ID, SandboxID: sb.ID}), nil)
		if meta[store.MetaPoolReady] == "1" && meta[store.MetaPool] == "busybox" {
			ready = append(ready, sb.ID)
		}
	}
	_, _, err := s.ClaimPoolSandbox(ctx, pool, "other", "prj_x", newSession(org, "v", "w0"))
	wantErr(t, "claim other template", err, store.ErrNotFound)

	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			ses := newSession(org, "v", "w"+string(rune('a'+i)))
			sb, out, err := s.ClaimPoolSandbox(ctx, pool, "busybox", "prj_x", ses)
			if store.IsNotFound(err) {
				return
			}
			if err != nil {
				t.Errorf("claim: %v", err)
				return
			}
			if sb.OrgID != org || sb.ProjectID != "prj_x" || out.SandboxID != sb.ID || sb.Metadata[store.MetaSessionID] != ses.ID {
				t.Errorf("claimed %+v for %+v", sb, out)
			}
			mu.Lock()
			got[sb.ID]++
			mu.Unlock()
		})
	}
	wg.Wait()
	want := map[string]int{}
	for _, id := range ready {
		want[id] = 1
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	tok, err := s.TokenByHash(ctx, ready[0])
	wantErr(t, "TokenByHash", err, nil)
	if tok.OrgID != org {
		t.Errorf("claimed sandbox's token org = %s, want %s", tok.OrgID, org)
	}

	t.Run("a session that cannot be inserted leaves the pool alone", func(t *testing.T) {
		sb := newSandbox(pool, base.Add(time.Minute))
		sb.Name, sb.State, sb.Metadata = "", sandbox.StateRunning, map[string]string{store.MetaPool: "busybox", store.MetaPoolReady: "1"}
		wantErr(t, "CreateSandbox", s.CreateSandbox(ctx, sb), nil)
		wantErr(t, "CreateSession", s.CreateSession(ctx, newSession(org, "v", "busy")), nil)
		_, _, err := s.ClaimPoolSandbox(ctx, pool, "busybox", "prj_x", newSession(org, "v", "busy"))
		wantErr(t, "claim for a busy context", err, store.ErrConflict)
		back, _ := s.GetSandbox(ctx, pool, sb.ID)
		if back.OrgID != pool || back.Version != 1 {
			t.Errorf("sandbox changed by a failed claim: %+v", back)
		}
	})

	t.Run("pools", func(t *testing.T) {
		// A pool is keyed by template and runtime class ("" the default):
		// a put replaces its own key's setting and no other.
		for _, p := range []store.Pool{
			{Template: "busybox", MinReady: 2, Max: 4},
			{Template: "busybox", Runtime: "gvisor", MinReady: 5, Max: 6},
			{Template: "busybox", MinReady: 1, Max: 3},
			{Template: "alpine", Runtime: "runc", MinReady: 0, Max: 1, Auto: true},
		} {
			wantErr(t, "PutPool", s.PutPool(ctx, p), nil)
		}
		ps, err := s.ListPools(ctx)
		wantErr(t, "ListPools", err, nil)
		type row struct {
			Template, Runtime string
			MinReady, Max     int
			Auto              bool
		}
		var got []row
		for _, p := range ps {
			got = append(got, row{p.Template, p.Runtime, p.MinReady, p.Max, p.Auto})
		}
		want := []row{{"alpine", "runc", 0, 1, true}, {"busybox", "", 1, 3, false}, {"busybox", "gvisor", 5, 6, false}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ListPools = %+v, want %+v", got, want)
		}
	})
}

// testAdoptSandbox pins the hand-over of a warm pool's sandbox to a
// create: the record takes the caller's ownership and settings, keeps its
// host and size, its token moves along, the new org sees it come up as a
// create would (creating → running), and a stale or stolen claim changes
// nothing.
func testAdoptSandbox(t *testing.T, s store.Store) {
	ctx := t.Context()
	pool, org := sandbox.NewID(sandbox.PrefixOrg), sandbox.NewID(sandbox.PrefixOrg)
	pooled := newSandbox(pool, base)
	pooled.Name, pooled.State = "", sandbox.StateRunning
	pooled.Metadata = map[string]string{store.MetaPool: "busybox", store.MetaPoolClaim: "x"}
	wantErr(t, "CreateSandbox", s.CreateSandbox(ctx, pooled), nil)
	wantErr(t, "CreateToken", s.CreateToken(ctx, store.Token{ID: sandbox.NewID(sandbox.PrefixToken), OrgID: pool,
		Role: store.RoleSandbox, Hash: pooled.ID, SandboxID: pooled.ID}), nil)
	cur, err := s.GetSandbox(ctx, pool, pooled.ID)
	wantErr(t, "GetSandbox", err, nil)

	mine := cur
	mine.OrgID, mine.ProjectID, mine.ParentID, mine.Name = org, "prj_x", "sbx_parent", "mine"
	mine.Env, mine.Metadata = map[string]string{"A": "1"}, map[string]string{"team": "x"}
	mine.CreatedAt = base.Add(time.Hour)
	mine.ExpiresAt, mine.TTLMs = ptr(base.Add(2*time.Hour)), 3_600_000
	mine.State, mine.CPU, mine.HostID = sandbox.StateFailed, 99, "elsewhere" // not the caller's to change

	stale := mine
	stale.Version++
	_, err = s.AdoptSandbox(ctx, pool, stale)
	wantErr(t, "adopt at a stale version", err, store.ErrConflict)
	_, err = s.AdoptSandbox(ctx, sandbox.NewID(sandbox.PrefixOrg), mine)
	wantErr(t, "adopt from another org", err, store.ErrNotFound)

	got, err := s.AdoptSandbox(ctx, pool, mine)
	wantErr(t, "AdoptSandbox", err, nil)
	want := mine
	want.State, want.CPU, want.HostID = cur.State, cur.CPU, cur.HostID
	want.Version, want.CreatedAt, want.UpdatedAt = cur.Version+1, stored(mine.CreatedAt), got.UpdatedAt
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("adopted (-want +got):\n%s", diff)
	}
	if back, err := s.GetSandbox(ctx, org, pooled.ID); err != nil || !cmp.Equal(back, got) {
		t.Errorf("read back in the new org: %v, %+v", err, back)
	}
	_, err = s.GetSandbox(ctx, pool, pooled.ID)
	wantErr(t, "read in the pool's org", err, store.ErrNotFound)
	tok, err := s.TokenByHash(ctx, pooled.ID)
	wantErr(t, "TokenByHash", err, nil)
	if tok.OrgID != org || tok.ProjectID != "prj_x" {
		t.Errorf("token moved to %s/%s, want %s/prj_x", tok.OrgID, tok.ProjectID, org)
	}
	evs, err := s.ListEvents(ctx, store.EventQuery{OrgID: org, SandboxID: pooled.ID})
	wantErr(t, "ListEvents", err, nil)
	if len(evs) != 1 || evs[0].Type != store.EventStateChanged ||
		!strings.Contains(string(evs[0].Data), `"from":"creating"`) || !strings.Contains(string(evs[0].Data), `"to":"running"`) {
		t.Errorf("the new org's events = %+v, want one state change creating → running", evs)
	}
	_, err = s.AdoptSandbox(ctx, pool, got)
	wantErr(t, "adopt twice", err, store.ErrNotFound)

	t.Run("a name the org's live sandbox holds", func(t *testing.T) {
		other := newSandbox(pool, base)
		other.Name, other.State = "", sandbox.StateRunning
		wantErr(t, "CreateSandbox", s.CreateSandbox(ctx, other), nil)
		cur, _ := s.GetSandbox(ctx, pool, other.ID)
		taken := cur
		taken.OrgID, taken.Name = org, "mine"
		_, err := s.AdoptSandbox(ctx, pool, taken)
		wantErr(t, "adopt under a taken name", err, store.ErrConflict)
		if back, _ := s.GetSandbox(ctx, pool, other.ID); back.OrgID != pool || back.Version != cur.Version {
			t.Errorf("a refused adoption changed the sandbox: %+v", back)
		}
	})
}
