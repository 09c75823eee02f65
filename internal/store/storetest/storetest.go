// Package storetest is the conformance suite for store.Store. Every
// implementation (sqlite and postgres) runs Run from its own tests, so
// the behaviour the rest of Platinum relies on — compare-and-swap versions,
// stable list order at microsecond precision, snapshot totals, event rows on
// state changes, error categories — is pinned down once, not per backend.
package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Run runs every conformance test against stores made by open. open is
// called once per subtest and must return a fresh, empty store; Run closes
// it when the subtest ends (implementations may also register their own
// cleanup: Close must tolerate being called twice).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Orgs", testOrgs},
		{"Tokens", testTokens},
		{"DeleteOrg", testDeleteOrg},
		{"TemplateVersions", testTemplateVersions},
		{"LatestTemplateVersion", testLatestTemplateVersion},
		{"CustomTemplateVersions", testCustomTemplateVersions},
		{"TemplateBuilds", testTemplateBuilds},
		{"BuildCache", testBuildCache},
		{"RegistryCredentials", testRegistryCredentials},
		{"CreateGetSandbox", testCreateGetSandbox},
		{"CreateSandboxDefaults", testCreateSandboxDefaults},
		{"SandboxMaps", testSandboxMaps},
		{"SandboxTimes", testSandboxTimes},
		{"UpdateSandbox", testUpdateSandbox},
		{"UpdateSandboxEvents", testUpdateSandboxEvents},
		{"UpdateFromSameRead", testUpdateFromSameRead},
		{"ConcurrentCAS", testConcurrentCAS},
		{"ConcurrentWriters", testConcurrentWriters},
		{"ListOrder", testListOrder},
		{"ListPagination", testListPagination},
		{"ListFilters", testListFilters},
		{"ListSnapshot", testListSnapshot},
		{"TreeAndFilters", testTreeAndFilters},
		{"Purge", testPurge},
		{"SandboxesInStates", testSandboxesInStates},
		{"Events", testEvents},
		{"Feeds", testFeeds},
		{"Snapshots", testSnapshots},
		{"Sessions", testSessions},
		{"ClaimPool", testClaimPool},
		{"AdoptSandbox", testAdoptSandbox},
		{"PoolClaims", testPoolClaims},
		{"PoolClaimOfSession", testPoolClaimOfSession},
		{"PoolBoots", testPoolBoots},
		{"CloseTwice", testCloseTwice},
		{"Projects", testProjects},
		{"OrgQuotasAndUsage", testOrgQuotasAndUsage},
		{"IdempotencyKeys", testIdempotencyKeys},
		{"ModifySandbox", testModifySandbox},
		{"ConcurrentModify", testConcurrentModify},
		{"ListSnapshotPaged", testListSnapshotPaged},
		{"EventCursorUnderWrites", testEventCursorUnderWrites},
		{"ConcurrentIdempotencyClaims", testConcurrentIdempotencyClaims},
		{"ConcurrentPoolClaims", testConcurrentPoolClaims},
		{"MicrosecondTimes", testMicrosecondTimes},
		{"Hosts", testHosts},
		{"HostUsage", testHostUsage},
		{"Leases", testLeases},
		{"ConcurrentLeases", testConcurrentLeases},
		{"LockKey", testLockKey},
		{"KeyFingerprints", testKeyFingerprints},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// base is a fixed instant with a millisecond part, so tests can place many
// rows inside one millisecond at distinct microseconds.
var base = time.Date(2025, 3, 4, 5, 6, 7, 123_000_000, time.UTC)

// stored is t as a store returns it: UTC, truncated to microseconds.
func stored(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// wantErr fails t unless err is (or, if target is nil, is not) an error
// wrapping target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	switch {
	case target == nil && err != nil:
		t.Fatalf("%s: unexpected error: %v", what, err)
	case target != nil && !errors.Is(err, target):
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// wantRead checks a read: its error as wantErr does, then what it
// returned (got) against want, the two checks every read test makes.
func wantRead[T any](t *testing.T, what string, err, target error, want, got T) {
	t.Helper()
	wantErr(t, what, err, target)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// idsOf lists what id reads from each record of list (its ID), in order;
// never nil, so it compares equal to a literal empty list.
func idsOf[T any](list []T, id func(*T) string) []string {
	out := []string{}
	for i := range list {
		out = append(out, id(&list[i]))
	}
	return out
}

// wantIDs checks a list read: no error (op names the read), and the IDs
// of its records are want, in the order order names.
func wantIDs[T any](t *testing.T, op, order string, list []T, err error, id func(*T) string, want []string) {
	t.Helper()
	wantErr(t, op, err, nil)
	if diff := cmp.Diff(want, idsOf(list, id)); diff != "" {
		t.Errorf("%s %s (-want +got):\n%s", op, order, diff)
	}
}

// wantCreated checks a read (got, err) of a record just created as
// created: what names the read.
func wantCreated[T any](t *testing.T, what string, created, got T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(created, got); diff != "" {
		t.Errorf("%s (-created +got):\n%s", what, diff)
	}
}

// diffOpts compare empty and nil slices as equal: the contract promises
// non-nil maps, which tests check explicitly, but not non-nil slices.
var diffOpts = []cmp.Option{cmpopts.EquateEmpty()}

func testOrgs(t *testing.T, s store.Store) {
	ctx := t.Context()
	org := store.Org{ID: sandbox.NewID(sandbox.PrefixOrg), Name: "acme", CreatedAt: base.Add(1500 * time.Nanosecond)}
	wantErr(t, "CreateOrg", s.CreateOrg(ctx, org), nil)

	tests := []struct {
		name    string
		id      string
		want    store.Org
		wantErr error
	}{
		{"present", org.ID, store.Org{ID: org.ID, Name: "acme", CreatedAt: stored(org.CreatedAt)}, nil},
		{"absent", sandbox.NewID(sandbox.PrefixOrg), store.Org{}, store.ErrNotFound},
		{"empty id", "", store.Org{}, store.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.GetOrg(ctx, tc.id)
			wantRead(t, "GetOrg", err, tc.wantErr, tc.want, got)
		})
	}

	t.Run("duplicate", func(t *testing.T) {
		err := s.CreateOrg(ctx, store.Org{ID: org.ID, Name: "other"})
		wantErr(t, "CreateOrg duplicate", err, store.ErrConflict)
		got, err := s.GetOrg(ctx, org.ID)
		wantErr(t, "GetOrg", err, nil)
		if got.Name != "acme" {
			t.Errorf("duplicate create overwrote name: %q", got.Name)
		}
	})

	t.Run("zero CreatedAt", func(t *testing.T) {
		before := stored(time.Now())
		o := store.Org{ID: sandbox.NewID(sandbox.PrefixOrg), Name: "now"}
		wantErr(t, "CreateOrg", s.CreateOrg(ctx, o), nil)
		got, err := s.GetOrg(ctx, o.ID)
		wantErr(t, "GetOrg", err, nil)
		if got.CreatedAt.Before(before) {
			t.Errorf("CreatedAt = %v, want now (>= %v)", got.CreatedAt, before)
		}
	})
}

func testTokens(t *testing.T, s store.Store) {
	ctx := t.Context()
	orgID := sandbox.NewID(sandbox.PrefixOrg)
	wantErr(t, "CreateOrg", s.CreateOrg(ctx, store.Org{ID: orgID, Name: "o"}), nil)
	tok := store.Token{
		ID: sandbox.NewID(sandbox.PrefixToken), OrgID: orgID, Role: store.RoleAdmin,
		Hash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", CreatedAt: base,
	}
	member := store.Token{
		ID: sandbox.NewID(sandbox.PrefixToken), OrgID: orgID, Role: store.RoleMember,
		Hash: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752", CreatedAt: base.Add(time.Microsecond),
	}
	wantErr(t, "CreateToken", s.CreateToken(ctx, tok), nil)
	wantErr(t, "CreateToken", s.CreateToken(ctx, member), nil)

	tests := []struct {
		name    string
		create  *store.Token // created before the lookup, if set
		hash    string
		want    store.Token
		wantErr error
	}{
		{name: "admin by hash", hash: tok.Hash, want: tok},
		{name: "member by hash", hash: member.Hash, want: member},
		{name: "unknown hash", hash: "00", wantErr: store.ErrNotFound},
		{name: "empty hash", hash: "", wantErr: store.ErrNotFound},
		{name: "hash is case sensitive", hash: "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08", wantErr: store.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.TokenByHash(ctx, tc.hash)
			wantRead(t, "TokenByHash", err, tc.wantErr, tc.want, got)
		})
	}

	conflicts := []struct {
		name string
		tok  store.Token
	}{
		{"same hash, new id", store.Token{ID: sandbox.NewID(sandbox.PrefixToken), OrgID: orgID, Role: store.RoleMember, Hash: tok.Hash}},
		{"same id, new hash", store.Token{ID: tok.ID, OrgID: orgID, Role: store.RoleMember, Hash: "ab"}},
	}
	for _, tc := range conflicts {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, "CreateToken", s.CreateToken(ctx, tc.tok), store.ErrConflict)
			got, err := s.TokenByHash(ctx, tok.Hash)
			wantErr(t, "TokenByHash", err, nil)
			if diff := cmp.Diff(tok, got); diff != "" {
				t.Errorf("token changed by a refused create (-want +got):\n%s", diff)
			}
			if _, err := s.TokenByHash(ctx, "ab"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("refused token is findable: %v", err)
			}
		})
	}
}

func testTemplateVersions(t *testing.T, s store.Store) {
	ctx := t.Context()
	v := store.TemplateVersion{
		ID: sandbox.NewID(sandbox.PrefixTemplateVersion), Slug: "busybox", Status: store.TemplateBuilding,
		Progress: "unpacking: 10%", CreatedAt: base.Add(999 * time.Nanosecond), UpdatedAt: base,
		HostID: "host_builder",
	}
	wantErr(t, "PutTemplateVersion", s.PutTemplateVersion(ctx, v), nil)
	got, err := s.GetTemplateVersion(ctx, v.ID)
	wantErr(t, "GetTemplateVersion", err, nil)
	want := v
	want.CreatedAt = stored(v.CreatedAt)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetTemplateVersion (-want +got):\n%s", diff)
	}

	// Replace: every field but CreatedAt is overwritten.
	ready := v
	ready.Slug = "busybox"
	ready.Status = store.TemplateReady
	ready.Progress = ""
	ready.RootFS = "/var/lib/platinum/templates/x/rootfs"
	ready.SizeBytes = 1 << 40
	ready.Error = ""
	ready.HostID = "host_other"
	ready.CreatedAt = base.Add(time.Hour) // must be ignored
	ready.UpdatedAt = base.Add(time.Minute)
	wantErr(t, "PutTemplateVersion replace", s.PutTemplateVersion(ctx, ready), nil)
	got, err = s.GetTemplateVersion(ctx, v.ID)
	wantErr(t, "GetTemplateVersion", err, nil)
	want = ready
	want.CreatedAt = stored(v.CreatedAt)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after replace (-want +got):\n%s", diff)
	}

	failed := store.TemplateVersion{
		ID: sandbox.NewID(sandbox.PrefixTemplateVersion), Slug: "pt-base", Status: store.TemplateFailed,
		Error: "debootstrap: exit status 1", CreatedAt: base.Add(2 * time.Microsecond), UpdatedAt: base.Add(2 * time.Microsecond),
	}
	wantErr(t, "PutTemplateVersion", s.PutTemplateVersion(ctx, failed), nil)

	_, err = s.GetTemplateVersion(ctx, sandbox.NewID(sandbox.PrefixTemplateVersion))
	wantErr(t, "GetTemplateVersion absent", err, store.ErrNotFound)

	list, err := s.ListTemplateVersions(ctx)
	wantErr(t, "ListTemplateVersions", err, nil)
	if diff := cmp.Diff([]store.TemplateVersion{failed, want}, list); diff != "" {
		t.Errorf("ListTemplateVersions newest first (-want +got):\n%s", diff)
	}

	t.Run("zero times", func(t *testing.T) {
		before := stored(time.Now())
		z := store.TemplateVersion{ID: sandbox.NewID(sandbox.PrefixTemplateVersion), Slug: "z", Status: store.TemplateBuilding}
		wantErr(t, "PutTemplateVersion", s.PutTemplateVersion(ctx, z), nil)
		got, err := s.GetTemplateVersion(ctx, z.ID)
		wantErr(t, "GetTemplateVersion", err, nil)
		if got.CreatedAt.Before(before) || got.UpdatedAt.Before(before) {
			t.Errorf("zero times not set to now: created %v updated %v, want >= %v", got.CreatedAt, got.UpdatedAt, before)
		}
	})
}

func testLatestTemplateVersion(t *testing.T, s store.Store) {
	ctx := t.Context()
	mk := func(slug string, at time.Time, st store.TemplateStatus) store.TemplateVersion {
		v := store.TemplateVersion{ID: sandbox.NewID(sandbox.PrefixTemplateVersion), Slug: slug, Status: st, CreatedAt: at, UpdatedAt: at}
		wantErr(t, "PutTemplateVersion", s.PutTemplateVersion(ctx, v), nil)
		return v
	}
	// Inserted out of order: latest is by CreatedAt, not insertion.
	baseNew := mk("pt-base", base.Add(3*time.Microsecond), store.TemplateBuilding)
	mk("pt-base", base.Add(1*time.Microsecond), store.TemplateReady)
	mk("pt-base", base.Add(2*time.Microsecond), store.TemplateReady)
	mk("busybox", base, store.TemplateReady)
	busyTie := mk("busybox", base, store.TemplateFailed) // same instant, larger ID
	mk("node", base.Add(time.Hour), store.TemplateReady) // other slug, newer

	tests := []struct {
		slug    string
		want    store.TemplateVersion
		wantErr error
	}{
		{slug: "pt-base", want: baseNew},
		{slug: "busybox", want: busyTie},
		{slug: "python-node", wantErr: store.ErrNotFound},
		{slug: "", wantErr: store.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.slug, func(t *testing.T) {
			got, err := s.LatestTemplateVersion(ctx, tc.slug)
			wantErr(t, "LatestTemplateVersion", err, tc.wantErr)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("LatestTemplateVersion(%q) (-want +got):\n%s", tc.slug, diff)
			}
		})
	}
}

// testDeleteOrg: an org's deletion takes its tokens with it (nobody can
// act as it) and leaves other orgs and its sandbox records alone.
func testDeleteOrg(t *testing.T, s store.Store) {
	ctx := t.Context()
	gone, kept := sandbox.NewID(sandbox.PrefixOrg), sandbox.NewID(sandbox.PrefixOrg)
	for i, o := range []string{gone, kept} {
		wantErr(t, "CreateOrg", s.CreateOrg(ctx, store.Org{ID: o, Name: "o"}), nil)
		tok := store.Token{ID: sandbox.NewID(sandbox.PrefixToken), OrgID: o, Role: store.RoleAdmin,
			Hash: fmt.Sprintf("%064d", i+1), CreatedAt: base}
		wantErr(t, "CreateToken", s.CreateToken(ctx, tok), nil)
	}
	sb := newSandbox(gone, base)
	wantErr(t, "CreateSandbox", s.CreateSandbox(ctx, sb), nil)
	wantErr(t, "DeleteOrg", s.DeleteOrg(ctx, gone), nil)
	_, err := s.GetOrg(ctx, gone)
	wantErr(t, "GetOrg of a deleted org", err, store.ErrNotFound)
	_, err = s.TokenByHash(ctx, fmt.Sprintf("%064d", 1))
	wantErr(t, "TokenByHash of a deleted org's token", err, store.ErrNotFound)
	_, err = s.TokenByHash(ctx, fmt.Sprintf("%064d", 2))
	wantErr(t, "TokenByHash of another org's token", err, nil)
	_, err = s.GetSandbox(ctx, gone, sb.ID)
	wantErr(t, "GetSandbox of a deleted org's sandbox", err, nil)
	wantErr(t, "DeleteOrg twice", s.DeleteOrg(ctx, gone), store.ErrNotFound)
}
