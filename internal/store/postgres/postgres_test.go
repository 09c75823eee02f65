package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/pgtest"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openTemp opens a store on a new, empty database of the test cluster.
func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), pgtest.NewDatabase(t), nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openTwo opens two stores on one new database, as two ptd processes
// sharing it have them; both close when the test ends.
func openTwo(ctx context.Context, t *testing.T) (a, b *Store) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	open := func() *Store {
		s, err := Open(ctx, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return open(), open()
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
}

// waitForLockWaiters waits until n backends wait for a lock (pg_locks):
// the only reliable way to know a concurrent call is blocked, not slow.
func waitForLockWaiters(t *testing.T, s *Store, locktype string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := waiting(t, s, locktype)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends wait for a %s lock, want %d", got, locktype, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waiting is how many backends wait for a lock of that type.
func waiting(t *testing.T, s *Store, locktype string) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = $1`, locktype).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEventCursorOutOfOrderCommit is the interleaving a cursor over a
// plain sequence gets wrong: transaction A takes an event ID and stays
// open; B appends an event after it. B must not commit an ID above A's
// while A is open, or a reader would move its cursor past A's ID and
// never see A's event. The reader sees neither until A commits, then
// both, in order.
func TestEventCursorOutOfOrderCommit(t *testing.T) {
	for _, end := range []string{"commit", "rollback"} {
		t.Run(end, func(t *testing.T) {
			ctx := t.Context()
			s := openTemp(t)
			if err := s.AddEvent(ctx, "org_a", "sbx_0", "before", nil); err != nil {
				t.Fatal(err)
			}
			evs, _ := s.Events(ctx, 0, 0)
			cursor := evs[0].ID

			txA, err := s.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer txA.Rollback(context.Background())
			if err := insertEvent(ctx, txA, "org_a", "sbx_a", "a", "{}", now()); err != nil {
				t.Fatal(err)
			}
			bDone := make(chan error, 1)
			go func() { bDone <- s.AddEvent(ctx, "org_a", "sbx_b", "b", nil) }()
			// Until B either waits for A (the store's lock) or has
			// committed (no lock: the reader below then sees B's event).
			var bErr error
			bFinished := false
			for deadline := time.Now().Add(30 * time.Second); ; {
				if waiting(t, s, "advisory") > 0 {
					break
				}
				select {
				case bErr = <-bDone:
					bFinished = true
				case <-time.After(10 * time.Millisecond):
				}
				if bFinished {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("B neither waits for a lock nor finished")
				}
			}
			got, err := s.Events(ctx, cursor, 0)
			if err != nil || len(got) != 0 {
				t.Fatalf("while A is open, Events after the cursor = %+v, %v; want none (a reader would skip A's ID)", got, err)
			}
			if end == "commit" {
				err = txA.Commit(ctx)
			} else {
				err = txA.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bFinished {
				bErr = <-bDone
			}
			if bErr != nil {
				t.Fatalf("B: %v", bErr)
			}
			got, err = s.Events(ctx, cursor, 0)
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for i, e := range got {
				types = append(types, e.Type)
				if i > 0 && e.ID <= got[i-1].ID {
					t.Errorf("IDs not increasing: %d after %d", e.ID, got[i-1].ID)
				}
			}
			want := []string{"a", "b"}
			if end == "rollback" {
				want = []string{"b"}
			}
			if diff := cmp.Diff(want, types); diff != "" {
				t.Errorf("events after the cursor (-want +got):\n%s", diff)
			}
		})
	}
}

// TestListTotalOneSnapshot inserts a sandbox between ListSandboxes' count
// and its page query: both must still come from one snapshot.
func TestListTotalOneSnapshot(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	mk := func(i int) sandbox.Sandbox {
		return sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: "org_l", State: sandbox.StateRunning,
			CreatedAt: time.Date(2025, 1, 1, 0, 0, 0, i*1000, time.UTC)}
	}
	for i := range 3 {
		if err := s.CreateSandbox(ctx, mk(i)); err != nil {
			t.Fatal(err)
		}
	}
	var inserted int
	s.afterListCount = func() {
		// A newer row lands at the head of the page, from another
		// connection, after the count.
		if err := s.CreateSandbox(ctx, mk(100+inserted)); err != nil {
			t.Error(err)
		}
		inserted++
	}
	for _, o := range []store.ListOptions{{OrgID: "org_l"}, {OrgID: "org_l", Limit: 2, Offset: 2}} {
		rows, total, err := s.ListSandboxes(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(max(total-o.Offset, 0), max(o.Limit, total)); len(rows) != want {
			t.Errorf("%+v: %d rows, total %d: not one snapshot", o, len(rows), total)
		}
	}
	if inserted != 2 {
		t.Fatalf("hook ran %d times, want 2", inserted)
	}
	s.afterListCount = nil
	if _, total, _ := s.ListSandboxes(ctx, store.ListOptions{OrgID: "org_l"}); total != 5 {
		t.Errorf("total after the hook's inserts = %d, want 5", total)
	}
}

// TestModifySandboxWaitsForTheRowLock holds one ModifySandbox inside fn
// and starts a second: the second's fn runs only after the first
// committed, and sees its change.
func TestModifySandboxWaitsForTheRowLock(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: "org_m", State: sandbox.StateRunning}
	if err := s.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	inFirst, release := make(chan struct{}), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		_, err := s.ModifySandbox(ctx, "", sb.ID, func(cur *sandbox.Sandbox) error {
			close(inFirst)
			<-release
			cur.Env["FIRST"] = "1"
			return nil
		})
		firstDone <- err
	}()
	<-inFirst
	var secondSaw map[string]string
	secondDone := make(chan error, 1)
	go func() {
		_, err := s.ModifySandbox(ctx, "", sb.ID, func(cur *sandbox.Sandbox) error {
			secondSaw = maps.Clone(cur.Env)
			cur.Env["SECOND"] = "1"
			return nil
		})
		secondDone <- err
	}()
	waitForLockWaiters(t, s, "transactionid", 1) // the second waits on the first's row lock
	close(release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if err := <-secondDone; err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"FIRST": "1"}, secondSaw); diff != "" {
		t.Errorf("second fn read (-want +got):\n%s", diff)
	}
	got, _ := s.GetSandbox(ctx, "", sb.ID)
	if diff := cmp.Diff(map[string]string{"FIRST": "1", "SECOND": "1"}, got.Env); diff != "" || got.Version != 3 {
		t.Errorf("stored env (-want +got):\n%s version %d", diff, got.Version)
	}
}

// TestPoolClaimSkipsLockedSandbox locks the oldest ready pooled sandbox
// in another transaction: a claim takes the next one at once instead of
// waiting or taking the same.
func TestPoolClaimSkipsLockedSandbox(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	var ids []string
	for i := range 2 {
		sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: "org_pool", State: sandbox.StateRunning,
			Template: "busybox", CreatedAt: time.Date(2025, 1, 1, 0, 0, i, 0, time.UTC),
			Metadata: map[string]string{store.MetaPool: "busybox", store.MetaPoolReady: "1"}}
		if err := s.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT 1 FROM sandboxes WHERE id = $1 FOR UPDATE`, ids[0]); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ses := store.Session{ID: sandbox.NewID(sandbox.PrefixSession), OrgID: "org_user", VaultID: "v", WorkflowID: "w",
		Template: "busybox", Status: store.SessionProvisioning}
	got, _, err := s.ClaimPoolSandbox(cctx, "org_pool", "busybox", "prj", ses)
	if err != nil {
		t.Fatalf("claim beside a locked sandbox: %v", err)
	}
	if got.ID != ids[1] {
		t.Errorf("claimed %s, want the unlocked %s", got.ID, ids[1])
	}
}

// TestMigrateConcurrentOpen opens one empty database from several
// processes' worth of stores at once: the schema is applied exactly once
// and every Open succeeds.
func TestMigrateConcurrentOpen(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	const n = 4
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			s, err := Open(t.Context(), dsn, nil)
			if err == nil {
				s.Close()
			}
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent Open: %v", err)
		}
	}
	s, err := Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rows, migrations int
	if err := s.pool.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT version) FROM schema_migrations`).Scan(&rows, &migrations); err != nil {
		t.Fatal(err)
	}
	files, _ := migrationFS.ReadDir("migrations")
	if rows != len(files) || migrations != len(files) {
		t.Errorf("schema_migrations has %d rows (%d versions), want %d", rows, migrations, len(files))
	}
}

// TestReopenKeepsDataAndRefusesNewerSchema reopens a database: the data
// stays and nothing is applied twice; a version this binary does not know
// is refused.
func TestReopenKeepsDataAndRefusesNewerSchema(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	s, err := Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateOrg(ctx, store.Org{ID: "org_keep", Name: "keep"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := s.GetOrg(ctx, "org_keep"); err != nil || o.Name != "keep" {
		t.Errorf("after reopen: %+v, %v", o, err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_future.sql')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(ctx, dsn, nil); err == nil {
		s.Close()
		t.Fatal("Open accepted a database with an unknown schema version")
	}
}

// TestNULInText: PostgreSQL stores no NUL in text (SQLite does). A NUL in
// a value a column holds as text is a caller's bad input
// (ErrInvalidArgument, a 400), not a server error; in the env, a JSON
// document, it round-trips.
func TestNULInText(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	bad := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: "org_n", State: sandbox.StateRunning,
		Metadata: map[string]string{"k": "a\x00b"}}
	if err := s.CreateSandbox(ctx, bad); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("metadata with NUL: %v, want ErrInvalidArgument", err)
	}
	bad.Metadata, bad.Reason = nil, "why\x00"
	if err := s.CreateSandbox(ctx, bad); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("reason with NUL: %v, want ErrInvalidArgument", err)
	}
	ok := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: "org_n", State: sandbox.StateRunning,
		Env: map[string]string{"K": "a\x00b"}}
	if err := s.CreateSandbox(ctx, ok); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSandbox(ctx, "", ok.ID)
	if err != nil || got.Env["K"] != "a\x00b" {
		t.Errorf("env with NUL: %q, %v", got.Env["K"], err)
	}
}

// TestTimesComeBackUTC: whatever the session time zone, times are UTC.
func TestTimesComeBackUTC(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	s, err := Open(ctx, dsn+"&timezone=Asia/Kolkata", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("x", 3600))
	if err := s.CreateOrg(ctx, store.Org{ID: "org_t", Name: "t", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	o, err := s.GetOrg(ctx, "org_t")
	if err != nil {
		t.Fatal(err)
	}
	if o.CreatedAt.Location() != time.UTC || !o.CreatedAt.Equal(at.Truncate(time.Microsecond)) {
		t.Errorf("CreatedAt = %v (%v), want %v in UTC", o.CreatedAt, o.CreatedAt.Location(), at.UTC().Truncate(time.Microsecond))
	}
}

// TestOpenRefusesABadURL without echoing it (it may hold a password).
func TestOpenRefusesABadURL(t *testing.T) {
	const url = "postgres://user:s3cret@[::1"
	_, err := Open(t.Context(), url, nil)
	if !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("Open(bad URL) = %v, want ErrInvalidArgument", err)
	}
	if msg := fmt.Sprint(err); strings.Contains(msg, "s3cret") {
		t.Errorf("error echoes the password: %s", msg)
	}
}

// TestLockKeyAcrossProcesses is LockKey between two stores on one
// database, as two api processes have them: the second waits (on an
// advisory lock, seen in pg_locks) until the first unlocks, and a holder
// whose connection dies loses the lock instead of keeping it forever.
func TestLockKeyAcrossProcesses(t *testing.T) {
	ctx := t.Context()
	a, b := openTwo(ctx, t)
	unlock, err := a.LockKey(ctx, "quota/org_a")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		u, err := b.LockKey(ctx, "quota/org_a")
		if err == nil {
			u()
		}
		got <- err
	}()
	waitForLockWaiters(t, a, "advisory", 1)
	select {
	case err := <-got:
		t.Fatalf("the second store's LockKey returned while the first held the key: %v", err)
	default:
	}
	unlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}

	// A holder whose connection dies (its backend terminated mid-hold, as
	// a killed process's would be) frees the key.
	dead, err := a.LockKey(ctx, "quota/org_b")
	if err != nil {
		t.Fatal(err)
	}
	defer dead() // its commit fails; it hands the broken connection back
	var killed int
	if err := b.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminating the holder's backend: %d terminated, %v", killed, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u, err := b.LockKey(wctx, "quota/org_b")
	if err != nil {
		t.Fatalf("the key of a closed holder stayed locked: %v", err)
	}
	u()
}

// TestLeaseAcrossProcesses races two stores on one database for one lease
// many times: never both hold it.
func TestLeaseAcrossProcesses(t *testing.T) {
	ctx := t.Context()
	url := pgtest.NewDatabase(t)
	var stores []*Store
	for range 2 {
		s, err := Open(ctx, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	for round := range 20 {
		name := fmt.Sprintf("loop/%d", round)
		var wg sync.WaitGroup
		held := make([]bool, 2)
		for i, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, h, err := s.AcquireLease(ctx, name, fmt.Sprintf("api_%d", i), time.Minute)
				if err != nil {
					t.Error(err)
				}
				held[i] = h
			}()
		}
		wg.Wait()
		if held[0] == held[1] {
			t.Fatalf("round %d: holders %v, want exactly one", round, held)
		}
	}
}

// TestListenEventsAcrossProcesses: an event one store commits wakes the
// listener of another store on the same database (another ptd process),
// and an event rolled back wakes nobody.
func TestListenEventsAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	a, b := openTwo(ctx, t)
	woke := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() { defer close(done); b.ListenEvents(ctx, func() { woke <- struct{}{} }) }()
	defer func() { cancel(); <-done }()
	select { // the wake-up that follows LISTEN
	case <-woke:
	case <-time.After(30 * time.Second):
		t.Fatal("the listener never started")
	}
	if err := a.AddEvent(ctx, "org_a", "sbx_1", "hello", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woke:
	case <-time.After(30 * time.Second):
		t.Fatal("another store's event commit did not wake the listener")
	}
	// A transaction that appends an event and rolls back notifies no one.
	err := a.tx(ctx, func(tx pgx.Tx) error {
		if err := insertEvent(ctx, tx, "org_a", "sbx_1", "hello", "{}", now()); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	if err == nil {
		t.Fatal("the transaction committed")
	}
	if err := a.AddEvent(ctx, "org_a", "sbx_1", "marker", nil); err != nil {
		t.Fatal(err)
	}
	<-woke // the marker's
	select {
	case <-woke:
		t.Fatal("a rolled-back event woke the listener")
	case <-time.After(200 * time.Millisecond):
	}
}
