package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// listOrder returns the IDs of sbs in list order: created_at desc, id desc.
func listOrder(sbs []sandbox.Sandbox) []string {
	sorted := slices.Clone(sbs)
	slices.SortFunc(sorted, func(a, b sandbox.Sandbox) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return ids(sorted)
}

func ids(sbs []sandbox.Sandbox) []string {
	out := make([]string, len(sbs))
	for i, sb := range sbs {
		out[i] = sb.ID
	}
	return out
}

// shuffled returns a fixed permutation of 0..n-1 that is neither ascending
// nor descending, so insertion order predicts neither time nor ID order.
func shuffled(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (i*7 + 3) % n
	}
	if n%7 == 0 {
		for i := range out {
			out[i] = (i*11 + 3) % n
		}
	}
	return out
}

// seedSameMillisecond creates, in org, n rows at distinct microseconds
// and ties rows sharing one CreatedAt, all inside one millisecond, inserted
// in an order unrelated to either time or ID. It returns them as stored.
func seedSameMillisecond(t *testing.T, s store.Store, org string, n, ties int) []sandbox.Sandbox {
	t.Helper()
	var all []sandbox.Sandbox
	for i := range n {
		all = append(all, newSandbox(org, base.Add(time.Duration(i)*time.Microsecond)))
	}
	for range ties {
		all = append(all, newSandbox(org, base.Add(time.Duration(n/2)*time.Microsecond)))
	}
	if last := all[len(all)-1].CreatedAt; last.Truncate(time.Millisecond) != base.Truncate(time.Millisecond) {
		t.Fatalf("seed spans more than one millisecond: %v", last)
	}
	out := make([]sandbox.Sandbox, len(all))
	for _, i := range shuffled(len(all)) {
		out[i] = mustCreate(t, s, all[i])
	}
	return out
}

func testListOrder(t *testing.T, s store.Store) {
	ctx := t.Context()
	mine := seedSameMillisecond(t, s, "org_l", 30, 10)
	other := seedSameMillisecond(t, s, "org_other", 5, 3)

	tests := []struct {
		name string
		opts store.ListOptions
		want []sandbox.Sandbox
	}{
		{"one org", store.ListOptions{OrgID: "org_l"}, mine},
		{"other org", store.ListOptions{OrgID: "org_other"}, other},
		{"every org", store.ListOptions{}, append(slices.Clone(mine), other...)},
		{"unknown org", store.ListOptions{OrgID: "org_none"}, nil},
		// Filtered lists may be served by another index (or none): the
		// order must not depend on which.
		{"one org by state", store.ListOptions{OrgID: "org_l", State: sandbox.StateCreating}, mine},
		{"every org by state", store.ListOptions{State: sandbox.StateCreating}, append(slices.Clone(mine), other...)},
		{"every org with deleted", store.ListOptions{IncludeDeleted: true}, append(slices.Clone(mine), other...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows, total, err := s.ListSandboxes(ctx, tc.opts)
			wantErr(t, "ListSandboxes", err, nil)
			if diff := cmp.Diff(listOrder(tc.want), ids(rows), diffOpts...); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
			if total != len(tc.want) {
				t.Errorf("total = %d, want %d", total, len(tc.want))
			}
			// Rows are whole records, not just IDs.
			byID := map[string]sandbox.Sandbox{}
			for _, sb := range tc.want {
				byID[sb.ID] = sb
			}
			for _, r := range rows {
				if diff := cmp.Diff(byID[r.ID], r); diff != "" {
					t.Errorf("row %s (-want +got):\n%s", r.ID, diff)
				}
			}
		})
	}
}

func testListPagination(t *testing.T, s store.Store) {
	ctx := t.Context()
	all := seedSameMillisecond(t, s, "org_p", 17, 6)
	want := listOrder(all)

	for _, limit := range []int{1, 4, 7, len(all), len(all) + 5} {
		t.Run("limit "+strconv.Itoa(limit), func(t *testing.T) {
			var got []string
			for offset := 0; ; offset += limit {
				rows, total, err := s.ListSandboxes(ctx, store.ListOptions{OrgID: "org_p", Limit: limit, Offset: offset})
				wantErr(t, "ListSandboxes", err, nil)
				if total != len(all) {
					t.Fatalf("offset %d: total = %d, want %d", offset, total, len(all))
				}
				if len(rows) > limit {
					t.Fatalf("offset %d: %d rows, limit %d", offset, len(rows), limit)
				}
				got = append(got, ids(rows)...)
				if len(rows) < limit {
					break
				}
				if offset > 10*len(all) {
					t.Fatal("pagination does not end")
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pages joined (-want +got):\n%s", diff)
			}
		})
	}

	edges := []struct {
		name          string
		limit, offset int
		want          []string
	}{
		{"no limit", 0, 0, want},
		{"negative limit", -1, 0, want},
		{"no limit with offset", 0, 20, want[20:]},
		{"negative offset", 3, -5, want[:3]},
		{"offset at end", 5, len(all), nil},
		{"offset past end", 5, len(all) + 100, nil},
	}
	for _, tc := range edges {
		t.Run(tc.name, func(t *testing.T) {
			rows, total, err := s.ListSandboxes(ctx, store.ListOptions{OrgID: "org_p", Limit: tc.limit, Offset: tc.offset})
			wantErr(t, "ListSandboxes", err, nil)
			if diff := cmp.Diff(tc.want, ids(rows), diffOpts...); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
			if total != len(all) {
				t.Errorf("total = %d, want %d", total, len(all))
			}
		})
	}
}

func testListFilters(t *testing.T, s store.Store) {
	ctx := t.Context()
	var all []sandbox.Sandbox
	add := func(org string, st sandbox.State, n int) {
		for range n {
			sb := newSandbox(org, base.Add(time.Duration(len(all))*time.Microsecond))
			sb.State = st
			if st == sandbox.StateDeleted {
				sb.DeletedAt = ptr(base.Add(time.Hour))
			}
			all = append(all, mustCreate(t, s, sb))
		}
	}
	add("org_f", sandbox.StateRunning, 3)
	add("org_f", sandbox.StateStopped, 2)
	add("org_f", sandbox.StateDeleted, 2)
	add("org_f", sandbox.StateFailed, 1)
	add("org_f", sandbox.StateDeleting, 1)
	add("org_g", sandbox.StateRunning, 1)
	add("org_g", sandbox.StateDeleted, 1)

	where := func(keep func(sandbox.Sandbox) bool) []sandbox.Sandbox {
		var out []sandbox.Sandbox
		for _, sb := range all {
			if keep(sb) {
				out = append(out, sb)
			}
		}
		return out
	}
	in := func(org string, states ...sandbox.State) []sandbox.Sandbox {
		return where(func(sb sandbox.Sandbox) bool {
			return (org == "" || sb.OrgID == org) && (len(states) == 0 || slices.Contains(states, sb.State))
		})
	}
	notDeleted := []sandbox.State{sandbox.StateRunning, sandbox.StateStopped, sandbox.StateFailed, sandbox.StateDeleting}

	tests := []struct {
		name string
		opts store.ListOptions
		// want is every matching row; the expected page is
		// want[Offset:Offset+Limit] in list order, the expected total len(want).
		want []sandbox.Sandbox
	}{
		{name: "default hides deleted", opts: store.ListOptions{OrgID: "org_f"}, want: in("org_f", notDeleted...)},
		{name: "include deleted", opts: store.ListOptions{OrgID: "org_f", IncludeDeleted: true}, want: in("org_f")},
		{name: "state deleted", opts: store.ListOptions{OrgID: "org_f", State: sandbox.StateDeleted}, want: in("org_f", sandbox.StateDeleted)},
		{name: "state deleted with include", opts: store.ListOptions{OrgID: "org_f", State: sandbox.StateDeleted, IncludeDeleted: true}, want: in("org_f", sandbox.StateDeleted)},
		{name: "state running", opts: store.ListOptions{OrgID: "org_f", State: sandbox.StateRunning}, want: in("org_f", sandbox.StateRunning)},
		{name: "state running with include", opts: store.ListOptions{OrgID: "org_f", State: sandbox.StateRunning, IncludeDeleted: true}, want: in("org_f", sandbox.StateRunning)},
		{name: "state deleting is live-listed", opts: store.ListOptions{OrgID: "org_f", State: sandbox.StateDeleting}, want: in("org_f", sandbox.StateDeleting)},
		{name: "state with no rows", opts: store.ListOptions{OrgID: "org_f", State: sandbox.StateArchived}, want: nil},
		{name: "every org running", opts: store.ListOptions{State: sandbox.StateRunning}, want: in("", sandbox.StateRunning)},
		{name: "every org default", opts: store.ListOptions{}, want: in("", notDeleted...)},
		{name: "every org include deleted", opts: store.ListOptions{IncludeDeleted: true}, want: all},
		{name: "limited page, full total", opts: store.ListOptions{OrgID: "org_f", Limit: 2}, want: in("org_f", notDeleted...)},
		{name: "limited state page", opts: store.ListOptions{OrgID: "org_f", State: sandbox.StateRunning, Limit: 2, Offset: 2}, want: in("org_f", sandbox.StateRunning)},
		{name: "limited page with deleted", opts: store.ListOptions{IncludeDeleted: true, Limit: 4, Offset: 3}, want: all},
		{name: "exclude failed and deleting", opts: store.ListOptions{OrgID: "org_f", ExcludeStates: []sandbox.State{sandbox.StateFailed, sandbox.StateDeleting}},
			want: in("org_f", sandbox.StateRunning, sandbox.StateStopped)},
		{name: "exclude with include deleted", opts: store.ListOptions{OrgID: "org_f", IncludeDeleted: true, ExcludeStates: []sandbox.State{sandbox.StateFailed}},
			want: in("org_f", sandbox.StateRunning, sandbox.StateStopped, sandbox.StateDeleted, sandbox.StateDeleting)},
		{name: "state wins over exclude", opts: store.ListOptions{OrgID: "org_f", State: sandbox.StateFailed, ExcludeStates: []sandbox.State{sandbox.StateFailed}},
			want: in("org_f", sandbox.StateFailed)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows, total, err := s.ListSandboxes(ctx, tc.opts)
			wantErr(t, "ListSandboxes", err, nil)
			want := listOrder(tc.want)
			if tc.opts.Offset > 0 {
				want = want[min(tc.opts.Offset, len(want)):]
			}
			if tc.opts.Limit > 0 {
				want = want[:min(tc.opts.Limit, len(want))]
			}
			if diff := cmp.Diff(want, ids(rows), diffOpts...); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
			if total != len(tc.want) {
				t.Errorf("total = %d, want %d", total, len(tc.want))
			}
		})
	}
}

// testListSnapshot lists while another goroutine inserts: the page (no
// limit) and the total must always come from the same snapshot.
func testListSnapshot(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const n = 150
	var wg sync.WaitGroup
	done := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			if err := s.CreateSandbox(ctx, newSandbox("org_s", base.Add(time.Duration(i)*time.Microsecond))); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()

	var failure string
	for checks := 0; failure == ""; checks++ {
		select {
		case err := <-done:
			if err != nil {
				failure = "CreateSandbox: " + err.Error()
				continue
			}
			done <- nil
		default:
		}
		rows, total, err := s.ListSandboxes(ctx, store.ListOptions{OrgID: "org_s"})
		switch {
		case err != nil:
			failure = "ListSandboxes: " + err.Error()
		case len(rows) != total:
			failure = fmt.Sprintf("check %d: %d rows but total %d: not one snapshot", checks, len(rows), total)
		case total == n:
			failure = "done"
		}
	}
	if failure != "done" {
		cancel()
		wg.Wait()
		t.Fatal(failure)
	}
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatalf("CreateSandbox: %v", err)
	}
}

func testSandboxesInStates(t *testing.T, s store.Store) {
	ctx := t.Context()
	// IDs are minted in one order and rows inserted in reverse, with ties
	// in CreatedAt, so "oldest first, then ID" is not insertion order.
	var seed []sandbox.Sandbox
	for i, c := range []struct {
		org string
		st  sandbox.State
		at  time.Duration
	}{
		{"org_1", sandbox.StateRunning, 9}, {"org_2", sandbox.StateStarting, 8}, {"org_1", sandbox.StateStopped, 7},
		{"org_3", sandbox.StateRunning, 3}, {"org_2", sandbox.StateRunning, 3}, {"org_1", sandbox.StateRunning, 3},
		{"org_1", sandbox.StateDeleted, 1}, {"org_3", sandbox.StateStarting, 0}, {"org_2", sandbox.StateStarting, 0},
	} {
		sb := newSandbox(c.org, base.Add(c.at*time.Microsecond))
		sb.State = c.st
		sb.Name = strconv.Itoa(i)
		seed = append(seed, sb)
	}
	var all []sandbox.Sandbox
	for _, sb := range slices.Backward(seed) {
		all = append(all, mustCreate(t, s, sb))
	}
	oldestFirst := func(states ...sandbox.State) []string {
		var out []sandbox.Sandbox
		for _, sb := range all {
			if slices.Contains(states, sb.State) {
				out = append(out, sb)
			}
		}
		ids := listOrder(out)
		slices.Reverse(ids)
		return ids
	}
	tests := []struct {
		name   string
		states []sandbox.State
	}{
		{"none", nil},
		{"running across orgs", []sandbox.State{sandbox.StateRunning}},
		{"transitional", []sandbox.State{sandbox.StateStarting, sandbox.StateStopping, sandbox.StateDeleting}},
		{"deleted", []sandbox.State{sandbox.StateDeleted}},
		{"unused state", []sandbox.State{sandbox.StateArchiving}},
		{"repeated state", []sandbox.State{sandbox.StateStopped, sandbox.StateStopped}},
		{"all", sandbox.AllStates},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.SandboxesInStates(ctx, tc.states...)
			wantErr(t, "SandboxesInStates", err, nil)
			if diff := cmp.Diff(oldestFirst(tc.states...), ids(got), diffOpts...); diff != "" {
				t.Errorf("SandboxesInStates(%v) (-want +got):\n%s", tc.states, diff)
			}
			for _, sb := range got {
				if sb.Env == nil || sb.Metadata == nil || sb.Version != 1 {
					t.Errorf("row %s not a full record: %+v", sb.ID, sb)
				}
			}
		})
	}
}

func testEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	none, err := s.Events(ctx, 0, 10)
	wantErr(t, "Events on empty store", err, nil)
	if len(none) != 0 {
		t.Fatalf("Events on empty store = %+v", none)
	}

	a := mustCreate(t, s, newSandbox("org_a", base))
	b := mustCreate(t, s, newSandbox("org_b", base))
	type step struct {
		sb *sandbox.Sandbox
		to sandbox.State
	}
	steps := []step{
		{&a, sandbox.StateStarting}, {&b, sandbox.StateStarting}, {&a, sandbox.StateRunning},
		{&b, sandbox.StateFailed}, {&a, sandbox.StateStopping}, {&a, sandbox.StateStopped}, {&b, sandbox.StateDeleted},
	}
	var want []store.Event
	for _, st := range steps {
		from := st.sb.State
		st.sb.State, st.sb.Reason = st.to, "to "+string(st.to)
		var err error
		if *st.sb, err = s.UpdateSandbox(ctx, *st.sb); err != nil {
			t.Fatalf("UpdateSandbox: %v", err)
		}
		data, _ := json.Marshal(store.StateChange{From: from, To: st.to, Reason: "to " + string(st.to)})
		want = append(want, store.Event{OrgID: st.sb.OrgID, SandboxID: st.sb.ID, Type: store.EventStateChanged, Data: string(data)})
	}

	all, err := s.Events(ctx, 0, 0)
	wantErr(t, "Events", err, nil)
	if len(all) != len(want) {
		t.Fatalf("Events = %d events, want %d: %+v", len(all), len(want), all)
	}
	for i, e := range all {
		if i > 0 && e.ID <= all[i-1].ID {
			t.Errorf("event IDs not increasing: %d after %d", e.ID, all[i-1].ID)
		}
		var raw map[string]any
		if err := json.Unmarshal([]byte(e.Data), &raw); err != nil {
			t.Fatalf("event %d data %q: %v", e.ID, e.Data, err)
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range raw {
				if !yield(k) {
					return
				}
			}
		})
		if diff := cmp.Diff([]string{"from", "reason", "to"}, keys); diff != "" {
			t.Errorf("event %d data keys (-want +got):\n%s", e.ID, diff)
		}
		if decodeChange(t, e) != decodeChange(t, want[i]) {
			t.Errorf("event %d data = %s, want %s", i, e.Data, want[i].Data)
		}
		e.ID, e.CreatedAt, e.Data = 0, time.Time{}, want[i].Data
		if diff := cmp.Diff(want[i], e); diff != "" {
			t.Errorf("event %d (-want +got):\n%s", i, diff)
		}
	}

	pages := []struct {
		name    string
		afterID int64
		limit   int
		want    []store.Event
	}{
		{"first three", 0, 3, all[:3]},
		{"next three", all[2].ID, 3, all[3:6]},
		{"tail", all[5].ID, 3, all[6:]},
		{"after last", all[len(all)-1].ID, 3, nil},
		{"no limit from middle", all[3].ID, 0, all[4:]},
		{"negative after", -1, 2, all[:2]},
	}
	for _, tc := range pages {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Events(ctx, tc.afterID, tc.limit)
			wantErr(t, "Events", err, nil)
			if diff := cmp.Diff(tc.want, got, diffOpts...); diff != "" {
				t.Errorf("Events(%d, %d) (-want +got):\n%s", tc.afterID, tc.limit, diff)
			}
		})
	}
}

func testCloseTwice(t *testing.T, s store.Store) {
	if err := s.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// testTreeAndFilters covers parent/child filters, metadata filters, live
// name uniqueness and AddEvent.
func testTreeAndFilters(t *testing.T, s store.Store) {
	ctx := t.Context()
	parent := newSandbox("org_t", base)
	if err := s.CreateSandbox(ctx, parent); err != nil {
		t.Fatal(err)
	}
	child := newSandbox("org_t", base.Add(time.Microsecond))
	child.ParentID, child.Metadata = parent.ID, map[string]string{"run": "nightly", "odd key": "x"}
	if err := s.CreateSandbox(ctx, child); err != nil {
		t.Fatal(err)
	}
	kids, total, err := s.ListSandboxes(ctx, store.ListOptions{OrgID: "org_t", ParentID: parent.ID})
	if err != nil || total != 1 || kids[0].ID != child.ID || kids[0].ParentID != parent.ID {
		t.Fatalf("children: %v %d %v", kids, total, err)
	}
	roots, _, _ := s.ListSandboxes(ctx, store.ListOptions{OrgID: "org_t", RootsOnly: true})
	if len(roots) != 1 || roots[0].ID != parent.ID {
		t.Errorf("roots: %v", roots)
	}
	for _, tc := range []struct {
		md   map[string]string
		want int
	}{{map[string]string{"run": "nightly"}, 1}, {map[string]string{"odd key": "x", "run": "nightly"}, 1}, {map[string]string{"run": "weekly"}, 0}, {map[string]string{"owner": "ci"}, 1}} {
		rows, _, err := s.ListSandboxes(ctx, store.ListOptions{OrgID: "org_t", Metadata: tc.md})
		if err != nil || len(rows) != tc.want {
			t.Errorf("metadata %v: %d rows, want %d (%v)", tc.md, len(rows), tc.want, err)
		}
	}
	// Names are unique per org among live sandboxes.
	dup := newSandbox("org_t", base.Add(2*time.Microsecond))
	dup.Name = parent.Name
	if err := s.CreateSandbox(ctx, dup); !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate live name: %v", err)
	}
	other := newSandbox("org_u", base)
	other.Name = parent.Name
	if err := s.CreateSandbox(ctx, other); err != nil {
		t.Errorf("same name in another org: %v", err)
	}
	got, _ := s.GetSandbox(ctx, "", child.ID)
	got.Name = parent.Name
	if _, err := s.UpdateSandbox(ctx, got); !errors.Is(err, store.ErrConflict) {
		t.Errorf("rename to a live name: %v", err)
	}
	p, _ := s.GetSandbox(ctx, "", parent.ID)
	p.State = sandbox.StateDeleted
	if _, err := s.UpdateSandbox(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetSandbox(ctx, "", child.ID)
	got.Name = parent.Name
	if _, err := s.UpdateSandbox(ctx, got); err != nil {
		t.Errorf("a deleted sandbox's name is free again: %v", err)
	}
	if err := s.AddEvent(ctx, "org_t", child.ID, "start_ram_not_restored", map[string]any{"restore": "disk_only"}); err != nil {
		t.Fatal(err)
	}
	evs, _ := s.Events(ctx, 0, 0)
	found := false
	for _, e := range evs {
		found = found || (e.Type == "start_ram_not_restored" && e.SandboxID == child.ID && strings.Contains(e.Data, "disk_only"))
	}
	if !found {
		t.Error("AddEvent's event not listed")
	}
}

// testPurge covers final disposal: ledger, queued object deletions,
// children losing only parent_id, and refusal for live records.
func testPurge(t *testing.T, s store.Store) {
	ctx := t.Context()
	parent := newSandbox("org_p", base)
	child := newSandbox("org_p", base.Add(time.Microsecond))
	child.ParentID = parent.ID
	for _, sb := range []sandbox.Sandbox{parent, child} {
		if err := s.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	l := store.LedgerEntry{DeletedReason: "user_deleted", DeletedBy: "user", Objects: []store.ObjectRef{
		{Bucket: "b1", Key: "manifests/a.json", Kind: "archive_manifest"}, {Bucket: "b2", Key: "manifests/a.json", Kind: "backup_manifest"}}}
	if err := s.PurgeSandbox(ctx, parent.ID, l); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("purge of a live record: %v", err)
	}
	p, _ := s.GetSandbox(ctx, "", parent.ID)
	p.State = sandbox.StateDeleted
	if _, err := s.UpdateSandbox(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := s.PurgeSandbox(ctx, parent.ID, l); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSandbox(ctx, "", parent.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("purged record still there: %v", err)
	}
	c, err := s.GetSandbox(ctx, "", child.ID)
	if err != nil || c.ParentID != "" || c.Name != child.Name {
		t.Errorf("child after parent purge: %+v %v", c, err)
	}
	led, _ := s.Ledger(ctx)
	if len(led) != 1 || led[0].SandboxID != parent.ID || led[0].OrgID != "org_p" || led[0].DeletedBy != "user" || len(led[0].Objects) != 2 || led[0].Objects[1].Bucket != "b2" {
		t.Fatalf("ledger: %+v", led)
	}
	dels, _ := s.ObjectDeletions(ctx, 0)
	if len(dels) != 2 {
		t.Fatalf("queued deletions: %+v", dels)
	}
	if err := s.FinishObjectDeletion(ctx, dels[0].ID, errors.New("store down")); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishObjectDeletion(ctx, dels[1].ID, nil); err != nil {
		t.Fatal(err)
	}
	dels, _ = s.ObjectDeletions(ctx, 0)
	if len(dels) != 1 || dels[0].Attempts != 1 || dels[0].Ref.Bucket != "b1" {
		t.Errorf("after finishing: %+v", dels)
	}
	if err := s.PurgeSandbox(ctx, parent.ID, l); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second purge: %v", err)
	}
}
