package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// The tests in this file pin what SQLite gives for free by serialising
// every writer and a server store must do on purpose: row locks for
// read-modify-write, one snapshot per paged list, a cursor that never
// skips a late commit, claims that never hand one row to two callers.

// errFromFn is what testModifySandbox's fn fails with.
var errFromFn = errors.New("refused by fn")

// testModifySandbox pins ModifySandbox's contract outside contention.
func testModifySandbox(t *testing.T, s store.Store) {
	ctx := t.Context()
	orig := mustCreate(t, s, newSandbox("org_m", base))

	t.Run("writes what fn leaves", func(t *testing.T) {
		got, err := s.ModifySandbox(ctx, "org_m", orig.ID, func(sb *sandbox.Sandbox) error {
			if sb.Version != orig.Version || sb.Env["FOO"] != "bar" {
				return fmt.Errorf("fn got %+v, not the stored record", sb)
			}
			sb.Env["NEW"] = "1"
			sb.Name = "renamed"
			// Never written: the record's identity and version.
			sb.ID, sb.OrgID, sb.CreatedAt, sb.Version = "sbx_other", "org_other", base.Add(time.Hour), 99
			return nil
		})
		wantErr(t, "ModifySandbox", err, nil)
		want := orig
		want.Env = map[string]string{"FOO": "bar", "NEW": "1"}
		want.Name, want.Version, want.UpdatedAt = "renamed", orig.Version+1, got.UpdatedAt
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("returned (-want +got):\n%s", diff)
		}
		back, err := s.GetSandbox(ctx, "org_m", orig.ID)
		wantErr(t, "GetSandbox", err, nil)
		if diff := cmp.Diff(got, back); diff != "" {
			t.Errorf("stored (-returned +got):\n%s", diff)
		}
		if !got.UpdatedAt.After(orig.UpdatedAt) {
			t.Errorf("UpdatedAt %v not moved past %v", got.UpdatedAt, orig.UpdatedAt)
		}
		if n := len(eventsFor(t, s, orig.ID)); n != 0 {
			t.Errorf("%d events without a state change", n)
		}
	})

	t.Run("an error from fn changes nothing", func(t *testing.T) {
		before, _ := s.GetSandbox(ctx, "", orig.ID)
		_, err := s.ModifySandbox(ctx, "", orig.ID, func(sb *sandbox.Sandbox) error {
			sb.Env = map[string]string{}
			sb.State = sandbox.StateFailed
			return fmt.Errorf("wrapped: %w", errFromFn)
		})
		wantErr(t, "ModifySandbox", err, errFromFn)
		after, _ := s.GetSandbox(ctx, "", orig.ID)
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("record changed by a refused fn (-before +after):\n%s", diff)
		}
	})

	t.Run("absent or in another org", func(t *testing.T) {
		called := false
		fn := func(*sandbox.Sandbox) error { called = true; return nil }
		_, err := s.ModifySandbox(ctx, "", sandbox.NewID(sandbox.PrefixSandbox), fn)
		wantErr(t, "absent", err, store.ErrNotFound)
		_, err = s.ModifySandbox(ctx, "org_x", orig.ID, fn)
		wantErr(t, "other org", err, store.ErrNotFound)
		if called {
			t.Error("fn called for a record the caller may not see")
		}
	})

	t.Run("a state change writes its event", func(t *testing.T) {
		got, err := s.ModifySandbox(ctx, "org_m", orig.ID, func(sb *sandbox.Sandbox) error {
			sb.State, sb.Reason = sandbox.StateRunning, "booted"
			return nil
		})
		wantErr(t, "ModifySandbox", err, nil)
		evs := eventsFor(t, s, orig.ID)
		if len(evs) != 1 || got.State != sandbox.StateRunning {
			t.Fatalf("state %s, events %+v", got.State, evs)
		}
		want := store.StateChange{From: sandbox.StateCreating, To: sandbox.StateRunning, Reason: "booted"}
		if c := decodeChange(t, evs[0]); c != want {
			t.Errorf("event data %+v, want %+v", c, want)
		}
	})

	t.Run("a taken name conflicts", func(t *testing.T) {
		other := mustCreate(t, s, newSandbox("org_m", base.Add(time.Microsecond)))
		_, err := s.ModifySandbox(ctx, "org_m", other.ID, func(sb *sandbox.Sandbox) error {
			sb.Name = "renamed"
			return nil
		})
		wantErr(t, "ModifySandbox", err, store.ErrConflict)
		if back, _ := s.GetSandbox(ctx, "", other.ID); back.Name != other.Name || back.Version != other.Version {
			t.Errorf("refused rename changed the record: %+v", back)
		}
	})
}

// testConcurrentModify races ModifySandbox calls that each merge disjoint
// keys into one sandbox's env (the env PATCH) together with plain
// compare-and-swap writers of other fields. Every merge must land — none
// lost, none refused — because each runs under the row lock against the
// latest committed env.
func testConcurrentModify(t *testing.T, s store.Store) {
	ctx := t.Context()
	const perWriter = 5
	sb := mustCreate(t, s, newSandbox("org_e", base))
	var wg sync.WaitGroup
	errs := make(chan error, writers+2)
	start := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range perWriter {
				key := "K" + strconv.Itoa(w) + "_" + strconv.Itoa(i)
				_, err := s.ModifySandbox(ctx, "org_e", sb.ID, func(cur *sandbox.Sandbox) error {
					cur.Env[key] = strconv.Itoa(i)
					if i > 0 { // and remove this writer's previous key
						delete(cur.Env, "K"+strconv.Itoa(w)+"_"+strconv.Itoa(i-1))
					}
					return nil
				})
				if err != nil {
					errs <- fmt.Errorf("writer %d merge %d: %w", w, i, err)
					return
				}
			}
		})
	}
	// Two compare-and-swap writers change metadata meanwhile: they may
	// conflict and retry, but must never overwrite a merged env.
	for w := range 2 {
		wg.Go(func() {
			<-start
			for i := 0; i < perWriter; {
				cur, err := s.GetSandbox(ctx, "", sb.ID)
				if err != nil {
					errs <- err
					return
				}
				cur.Metadata = map[string]string{"cas": strconv.Itoa(w*100 + i)}
				if _, err := s.UpdateSandbox(ctx, cur); errors.Is(err, store.ErrConflict) {
					continue
				} else if err != nil {
					errs <- fmt.Errorf("cas writer %d: %w", w, err)
					return
				}
				i++
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := s.GetSandbox(ctx, "", sb.ID)
	wantErr(t, "GetSandbox", err, nil)
	want := map[string]string{"FOO": "bar"}
	for w := range writers {
		want["K"+strconv.Itoa(w)+"_"+strconv.Itoa(perWriter-1)] = strconv.Itoa(perWriter - 1)
	}
	if diff := cmp.Diff(want, got.Env); diff != "" {
		t.Errorf("env after concurrent merges (-want +got):\n%s", diff)
	}
	if wantV := int64(1 + writers*perWriter + 2*perWriter); got.Version != wantV {
		t.Errorf("version %d, want %d (one per write)", got.Version, wantV)
	}
}

// testListSnapshotPaged lists pages while another goroutine inserts:
// every page must agree with its own total (one snapshot), so a page is
// never longer than the total leaves room for, nor shorter.
func testListSnapshotPaged(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const n, limit, offset = 120, 10, 5
	done := make(chan error, 1)
	go func() {
		for i := range n {
			// Every insert is newer than the last: it shifts every page.
			if err := s.CreateSandbox(ctx, newSandbox("org_pg", base.Add(time.Duration(i)*time.Microsecond))); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for checks := 0; ; checks++ {
		finished := false
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("CreateSandbox: %v", err)
			}
			finished = true
		default:
		}
		rows, total, err := s.ListSandboxes(ctx, store.ListOptions{OrgID: "org_pg", Limit: limit, Offset: offset})
		wantErr(t, "ListSandboxes", err, nil)
		if want := min(max(total-offset, 0), limit); len(rows) != want {
			t.Fatalf("check %d: %d rows at offset %d with total %d, want %d: not one snapshot", checks, len(rows), offset, total, want)
		}
		if finished {
			if total != n {
				t.Fatalf("total %d after every insert, want %d", total, n)
			}
			return
		}
	}
}

// testEventCursorUnderWrites follows Events by its cursor while writers
// append events concurrently (AddEvent and state changes). The reader must
// end with every event exactly once, in ID order: a cursor that skipped a
// row committed after a higher ID would lose it for good.
func testEventCursorUnderWrites(t *testing.T, s store.Store) {
	ctx := t.Context()
	const perWriter = 15
	const nWriters = 8
	var wg sync.WaitGroup
	errs := make(chan error, nWriters)
	stop := make(chan struct{})
	for w := range nWriters {
		wg.Go(func() {
			sb := mustCreate(t, s, newSandbox("org_c", base))
			for i := range perWriter {
				var err error
				if i%2 == 0 {
					err = s.AddEvent(ctx, "org_c", sb.ID, "tick", map[string]int{"w": w, "i": i})
				} else {
					if sb.State == sandbox.StateRunning {
						sb.State = sandbox.StateStopped
					} else {
						sb.State = sandbox.StateRunning
					}
					sb, err = s.UpdateSandbox(ctx, sb)
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d event %d: %w", w, i, err)
					return
				}
			}
		})
	}
	var seen []int64
	var cursor int64
	read := func() {
		evs, err := s.Events(ctx, cursor, 7)
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		for _, e := range evs {
			seen = append(seen, e.ID)
			cursor = e.ID
		}
	}
	go func() { wg.Wait(); close(stop) }()
	for running := true; running; {
		select {
		case <-stop:
			running = false
		default:
		}
		read()
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for { // drain what is left after the writers finished
		n := len(seen)
		read()
		if len(seen) == n {
			break
		}
	}
	all, err := s.Events(ctx, 0, 0)
	wantErr(t, "Events", err, nil)
	var allIDs []int64
	for _, e := range all {
		allIDs = append(allIDs, e.ID)
	}
	if len(allIDs) != nWriters*perWriter {
		t.Errorf("%d events stored, want %d", len(allIDs), nWriters*perWriter)
	}
	if !slices.IsSorted(seen) {
		t.Errorf("cursor reads out of ID order: %v", seen)
	}
	if diff := cmp.Diff(allIDs, seen); diff != "" {
		t.Errorf("events seen through the cursor (-stored +seen):\n%s", diff)
	}
}

// testConcurrentIdempotencyClaims races claims of one key: exactly one
// caller claims it, and every other is answered with that claim. Then the
// same for replacing an abandoned claim.
func testConcurrentIdempotencyClaims(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := base
	race := func(key string, at time.Time) (winners []string, held map[string]int) {
		t.Helper()
		var mu sync.Mutex
		held = map[string]int{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range writers {
			wg.Go(func() {
				rec := store.IdempotencyRecord{Scope: "tok_race", Key: key, RequestHash: "h", Claim: "c" + strconv.Itoa(w),
					CreatedAt: at, LockedUntil: at.Add(time.Minute), ExpiresAt: at.Add(24 * time.Hour)}
				<-start
				got, claimed, err := s.ClaimIdempotencyKey(ctx, rec, at)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("claim %d: %v", w, err)
				case claimed:
					winners = append(winners, got.Claim)
				default:
					held[got.Claim]++
				}
			})
		}
		close(start)
		wg.Wait()
		return winners, held
	}

	winners, held := race("k-new", now)
	if len(winners) != 1 {
		t.Fatalf("%d callers claimed one new key (%v), want exactly 1", len(winners), winners)
	}
	if diff := cmp.Diff(map[string]int{winners[0]: writers - 1}, held); diff != "" {
		t.Errorf("losers were answered with (-want +got):\n%s", diff)
	}

	// The winner's lock runs out: the key is claimable again, once.
	later := now.Add(2 * time.Minute)
	again, held := race("k-new", later)
	if len(again) != 1 {
		t.Fatalf("%d callers replaced one abandoned claim (%v), want exactly 1", len(again), again)
	}
	if diff := cmp.Diff(map[string]int{again[0]: writers - 1}, held); diff != "" {
		t.Errorf("losers of the takeover were answered with (-want +got):\n%s", diff)
	}
	got, err := s.GetIdempotencyKey(ctx, "tok_race", "k-new")
	wantErr(t, "GetIdempotencyKey", err, nil)
	if got.Claim != again[0] || !got.LockedUntil.Equal(stored(later.Add(time.Minute))) {
		t.Errorf("stored record %+v, want the takeover's claim %s", got, again[0])
	}
}

// testConcurrentPoolClaims runs rounds of more claimers than ready pooled
// sandboxes: each ready sandbox goes to exactly one claimer, the others
// get ErrNotFound, and no claim fails any other way.
func testConcurrentPoolClaims(t *testing.T, s store.Store) {
	ctx := t.Context()
	pool, org := sandbox.NewID(sandbox.PrefixOrg), sandbox.NewID(sandbox.PrefixOrg)
	const rounds, ready, claimers = 5, 2, 6
	for round := range rounds {
		want := map[string]int{}
		for i := range ready {
			sb := newSandbox(pool, base.Add(time.Duration(round*ready+i)*time.Microsecond))
			sb.Name, sb.State = "", sandbox.StateRunning
			sb.Metadata = map[string]string{store.MetaPool: "busybox", store.MetaPoolReady: "1"}
			wantErr(t, "CreateSandbox", s.CreateSandbox(ctx, sb), nil)
			want[sb.ID] = 1
		}
		var mu sync.Mutex
		got := map[string]int{}
		notFound := 0
		var wg sync.WaitGroup
		start := make(chan struct{})
		for c := range claimers {
			wg.Go(func() {
				ses := newSession(org, "v", fmt.Sprintf("r%d-c%d", round, c))
				<-start
				sb, out, err := s.ClaimPoolSandbox(ctx, pool, "busybox", "prj_x", ses)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case store.IsNotFound(err):
					notFound++
				case err != nil:
					t.Errorf("round %d claim %d: %v", round, c, err)
				case out.SandboxID != sb.ID || sb.OrgID != org:
					t.Errorf("round %d claim %d: session %+v, sandbox %+v", round, c, out, sb)
				default:
					got[sb.ID]++
				}
			})
		}
		close(start)
		wg.Wait()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round %d: claims (-want +got):\n%s", round, diff)
		}
		if notFound != claimers-ready {
			t.Fatalf("round %d: %d claimers found nothing, want %d", round, notFound, claimers-ready)
		}
	}
}

// testMicrosecondTimes pins six fractional digits everywhere a time is
// stored: a time comes back truncated (not rounded) to the microsecond,
// and lists ordered by time keep rows one microsecond apart, inside one
// millisecond, in order.
func testMicrosecondTimes(t *testing.T, s store.Store) {
	ctx := t.Context()
	// 999 ns past each microsecond: rounding would show as +1 µs.
	at := func(i int) time.Time { return base.Add(time.Duration(i)*time.Microsecond + 999) }
	order := []int{3, 0, 4, 1, 2} // inserted out of time order

	t.Run("sessions", func(t *testing.T) {
		org := sandbox.NewID(sandbox.PrefixOrg)
		byTime := map[int]string{}
		for _, i := range order {
			ses := newSession(org, "v", "w"+strconv.Itoa(i))
			ses.CreatedAt = at(i)
			ready := at(i + 10)
			ses.ReadyAt = &ready
			wantErr(t, "CreateSession", s.CreateSession(ctx, ses), nil)
			got, err := s.GetSession(ctx, org, ses.ID)
			wantErr(t, "GetSession", err, nil)
			if !got.CreatedAt.Equal(stored(at(i))) || got.ReadyAt == nil || !got.ReadyAt.Equal(stored(ready)) {
				t.Errorf("session %d: created %v ready %v, want %v and %v", i, got.CreatedAt, got.ReadyAt, stored(at(i)), stored(ready))
			}
			byTime[i] = ses.ID
		}
		list, err := s.ListSessions(ctx, org, true)
		wantIDs(t, "ListSessions", "newest first", list, err, func(ses *store.Session) string { return ses.ID },
			[]string{byTime[4], byTime[3], byTime[2], byTime[1], byTime[0]})
	})

	t.Run("snapshots", func(t *testing.T) {
		byTime := map[int]string{}
		for _, i := range order {
			sn := sandbox.Snapshot{ID: sandbox.NewID(sandbox.PrefixSnapshot), OrgID: "org_t", SandboxID: "sbx_t", Kind: sandbox.KindSnapshot,
				State: sandbox.SnapshotReady, CreatedAt: at(i), UpdatedAt: at(i)}
			wantErr(t, "CreateSnapshot", s.CreateSnapshot(ctx, sn), nil)
			got, err := s.GetSnapshot(ctx, "org_t", sn.ID)
			wantErr(t, "GetSnapshot", err, nil)
			if !got.CreatedAt.Equal(stored(at(i))) {
				t.Errorf("snapshot %d: created %v, want %v", i, got.CreatedAt, stored(at(i)))
			}
			byTime[i] = sn.ID
		}
		list, err := s.ListSnapshots(ctx, store.SnapshotFilter{OrgID: "org_t"})
		wantIDs(t, "ListSnapshots", "newest first", list, err, func(sn *sandbox.Snapshot) string { return sn.ID },
			[]string{byTime[4], byTime[3], byTime[2], byTime[1], byTime[0]})
	})

	t.Run("artifacts and webhooks", func(t *testing.T) {
		arts, hooks := map[int]string{}, map[int]string{}
		for _, i := range order {
			a, err := s.CreateArtifact(ctx, store.Artifact{ID: sandbox.NewID("art_"), OrgID: "org_t", SandboxID: "sbx_t", Name: "f",
				Path: "/f", Kind: store.ArtifactFile, CreatedAt: at(i)})
			wantErr(t, "CreateArtifact", err, nil)
			if !a.CreatedAt.Equal(stored(at(i))) {
				t.Errorf("artifact %d: returned created %v, want %v", i, a.CreatedAt, stored(at(i)))
			}
			back, err := s.GetArtifact(ctx, "org_t", a.ID)
			wantErr(t, "GetArtifact", err, nil)
			if !back.CreatedAt.Equal(stored(at(i))) {
				t.Errorf("artifact %d: stored created %v, want %v", i, back.CreatedAt, stored(at(i)))
			}
			arts[i] = a.ID
			w, err := s.CreateWebhook(ctx, store.Webhook{ID: sandbox.NewID("whk_"), OrgID: "org_t", URL: "https://example.com", CreatedAt: at(i)})
			wantErr(t, "CreateWebhook", err, nil)
			hooks[i] = w.ID
		}
		la, err := s.ListArtifacts(ctx, "org_t", "")
		wantIDs(t, "ListArtifacts", "newest first", la, err, func(a *store.Artifact) string { return a.ID },
			[]string{arts[4], arts[3], arts[2], arts[1], arts[0]})
		lw, err := s.ListWebhooks(ctx, "org_t")
		wantIDs(t, "ListWebhooks", "oldest first", lw, err, func(w *store.Webhook) string { return w.ID },
			[]string{hooks[0], hooks[1], hooks[2], hooks[3], hooks[4]})
	})

	t.Run("sandbox times", func(t *testing.T) {
		sb := newSandbox("org_t", at(7))
		sb.UpdatedAt = at(8)
		deleted := at(9)
		sb.DeletedAt = &deleted
		got := mustCreate(t, s, sb)
		if !got.CreatedAt.Equal(stored(at(7))) || !got.UpdatedAt.Equal(stored(at(8))) || !got.DeletedAt.Equal(stored(at(9))) {
			t.Errorf("times %v %v %v, want %v %v %v", got.CreatedAt, got.UpdatedAt, *got.DeletedAt,
				stored(at(7)), stored(at(8)), stored(at(9)))
		}
		if got.CreatedAt.Nanosecond()%1000 != 0 {
			t.Errorf("CreatedAt %v has sub-microsecond digits", got.CreatedAt)
		}
	})
}
