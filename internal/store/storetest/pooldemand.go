package storetest

import (
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// testPoolClaims pins the warm pools' demand record: claims keyed by ID
// (a second one with the same ID is a conflict), read back since a time
// by pool and oldest first with each pool capped to its newest, their
// hand-overs ended once (absent ones too), and pruned before a time.
func testPoolClaims(t *testing.T, s store.Store) {
	ctx := t.Context()
	claim := func(id, template, runtime string, secs int, warm, handing bool) store.PoolClaim {
		return store.PoolClaim{ID: id, Template: template, Runtime: runtime, At: base.Add(time.Duration(secs) * time.Second),
			Warm: warm, HandingOver: handing}
	}
	all := []store.PoolClaim{
		claim("c1", "busybox", "", 0, true, false),
		claim("c2", "busybox", "", 10, false, false),
		claim("c3", "busybox", "gvisor", 5, true, true),
		claim("c4", "alpine", "", 20, true, false),
		claim("c5", "busybox", "", 30, true, true),
	}
	for _, c := range all {
		wantErr(t, "AddPoolClaim "+c.ID, s.AddPoolClaim(ctx, c), nil)
	}
	wantErr(t, "AddPoolClaim twice", s.AddPoolClaim(ctx, claim("c1", "other", "", 1, true, false)), store.ErrConflict)
	// Within a microsecond of another claim, with the store's clock.
	wantErr(t, "AddPoolClaim at now", s.AddPoolClaim(ctx, store.PoolClaim{ID: "now", Template: "now"}), nil)

	got, err := s.PoolClaims(ctx, store.PoolClaimQuery{Since: base})
	wantRead(t, "PoolClaims since base", err, nil,
		[]store.PoolClaim{all[3], all[0], all[1], all[4], all[2]}, withoutTemplate(got, "now"))
	got, err = s.PoolClaims(ctx, store.PoolClaimQuery{Since: base.Add(5 * time.Second)})
	wantRead(t, "PoolClaims since base+5s", err, nil,
		[]store.PoolClaim{all[3], all[1], all[4], all[2]}, withoutTemplate(got, "now"))
	got, err = s.PoolClaims(ctx, store.PoolClaimQuery{Since: base, PerPool: 1})
	wantRead(t, "PoolClaims newest one of each pool", err, nil,
		[]store.PoolClaim{all[3], all[4], all[2]}, withoutTemplate(got, "now"))
	got, err = s.PoolClaims(ctx, store.PoolClaimQuery{Since: base, Templates: []string{"busybox"}, HandingOver: true})
	wantRead(t, "PoolClaims of busybox handing over", err, nil, []store.PoolClaim{all[4], all[2]}, got)
	got, err = s.PoolClaims(ctx, store.PoolClaimQuery{Since: base, Templates: []string{"alpine", "busybox"}, PerPool: 2})
	wantRead(t, "PoolClaims of two templates, two a pool", err, nil,
		[]store.PoolClaim{all[3], all[1], all[4], all[2]}, got)
	if now, _ := s.PoolClaims(ctx, store.PoolClaimQuery{Since: time.Now().Add(-time.Hour)}); len(now) != 1 || now[0].ID != "now" || now[0].At.IsZero() {
		t.Errorf("a claim without a time: %+v, want one at now", now)
	}

	wantErr(t, "EndPoolHandOver", s.EndPoolHandOver(ctx, "c5"), nil)
	wantErr(t, "EndPoolHandOver again", s.EndPoolHandOver(ctx, "c5"), nil)
	wantErr(t, "EndPoolHandOver of an absent claim", s.EndPoolHandOver(ctx, "nope"), nil)
	all[4].HandingOver = false
	got, err = s.PoolClaims(ctx, store.PoolClaimQuery{Since: base.Add(30 * time.Second)})
	wantRead(t, "the ended hand-over", err, nil, []store.PoolClaim{all[4]}, withoutTemplate(got, "now"))

	n, err := s.PrunePoolClaims(ctx, base.Add(10*time.Second))
	wantErr(t, "PrunePoolClaims", err, nil)
	if n != 2 {
		t.Errorf("PrunePoolClaims deleted %d, want 2 (c1, c3)", n)
	}
	got, err = s.PoolClaims(ctx, store.PoolClaimQuery{})
	wantRead(t, "PoolClaims after the prune", err, nil,
		[]store.PoolClaim{all[3], all[1], all[4]}, withoutTemplate(got, "now"))
}

// withoutTemplate is claims but those of template.
func withoutTemplate(claims []store.PoolClaim, template string) []store.PoolClaim {
	out := []store.PoolClaim{}
	for _, c := range claims {
		if c.Template != template {
			out = append(out, c)
		}
	}
	return out
}

// testPoolClaimOfSession: a session's claim of a pooled sandbox is the
// pool's demand in the claim's own transaction — warm, at the session's
// creation, its hand-over running — and a claim that fails (nothing
// claimable, or the session cannot be inserted) records none.
func testPoolClaimOfSession(t *testing.T, s store.Store) {
	ctx := t.Context()
	pool, org := sandbox.NewID(sandbox.PrefixOrg), sandbox.NewID(sandbox.PrefixOrg)
	sb := newSandbox(pool, base)
	sb.Name, sb.State, sb.Metadata = "", sandbox.StateRunning, map[string]string{store.MetaPool: "busybox", store.MetaPoolReady: "1"}
	wantErr(t, "CreateSandbox", s.CreateSandbox(ctx, sb), nil)

	wantErr(t, "CreateSession", s.CreateSession(ctx, newSession(org, "v", "busy")), nil)
	_, _, err := s.ClaimPoolSandbox(ctx, pool, "busybox", "prj_x", newSession(org, "v", "busy"))
	wantErr(t, "claim for a busy context", err, store.ErrConflict)
	_, _, err = s.ClaimPoolSandbox(ctx, pool, "alpine", "prj_x", newSession(org, "v", "w0"))
	wantErr(t, "claim of a template without a pool", err, store.ErrNotFound)
	got, err := s.PoolClaims(ctx, store.PoolClaimQuery{})
	wantRead(t, "claims after failed claims", err, nil, []store.PoolClaim{}, got)

	ses := newSession(org, "v", "w1")
	ses.CreatedAt = base.Add(time.Minute)
	_, _, err = s.ClaimPoolSandbox(ctx, pool, "busybox", "prj_x", ses)
	wantErr(t, "ClaimPoolSandbox", err, nil)
	got, err = s.PoolClaims(ctx, store.PoolClaimQuery{Since: base})
	wantRead(t, "the session's claim", err, nil, []store.PoolClaim{{ID: ses.ID, Template: "busybox", At: stored(ses.CreatedAt),
		Warm: true, HandingOver: true}}, got)
}

// testPoolBoots pins the pools' boot record: each pool keeps its keep
// newest boots, read back by pool and oldest first, to the microsecond.
func testPoolBoots(t *testing.T, s store.Store) {
	ctx := t.Context()
	boot := func(template, runtime string, i int) store.PoolBoot {
		return store.PoolBoot{Template: template, Runtime: runtime, At: base.Add(time.Duration(i) * time.Second),
			Took: time.Duration(i+1)*time.Second + 1234*time.Microsecond}
	}
	var want []store.PoolBoot
	// Added out of order: the newest by time are kept, not the last added.
	for _, i := range []int{9, 0, 1, 2, 3, 4, 5, 6, 7, 8} {
		wantErr(t, "AddPoolBoot", s.AddPoolBoot(ctx, boot("busybox", "", i), 8), nil)
	}
	wantErr(t, "AddPoolBoot gvisor", s.AddPoolBoot(ctx, boot("busybox", "gvisor", 0), 8), nil)
	wantErr(t, "AddPoolBoot alpine", s.AddPoolBoot(ctx, boot("alpine", "", 3), 0), nil)
	want = append(want, boot("alpine", "", 3))
	for i := 2; i < 10; i++ {
		want = append(want, boot("busybox", "", i))
	}
	want = append(want, boot("busybox", "gvisor", 0))
	got, err := s.PoolBoots(ctx)
	wantRead(t, "PoolBoots", err, nil, want, got)
}
