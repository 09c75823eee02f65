package sqlite

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// newCachedSandbox stores an org and one sandbox in it, the record the
// cache tests read and write, and returns the sandbox's ID.
func newCachedSandbox(t *testing.T, s *Store) string {
	t.Helper()
	ctx := t.Context()
	if err := s.CreateOrg(ctx, store.Org{ID: "org_default", Name: "d", CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	id := sandbox.NewID(sandbox.PrefixSandbox)
	now := time.Now().UTC().Truncate(time.Microsecond)
	sb := sandbox.Sandbox{ID: id, OrgID: "org_default", State: sandbox.StateCreating, Template: "busybox",
		CPU: 1, RAMMB: 512, DiskGB: 2, Env: map[string]string{}, Metadata: map[string]string{"k": "v"},
		CreatedAt: now, UpdatedAt: now}
	if err := s.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestReadCacheSeesEveryWrite: once a write returns, every read (from any
// goroutine) sees it, though reads are served from memory between writes;
// reads racing writes never leave an older record behind.
// TestReadCacheSeesOtherProcesses covers writers outside this Store.
func TestReadCacheSeesEveryWrite(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	id := newCachedSandbox(t, s)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 { // readers keep the cache filled while the writer works
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.GetSandbox(ctx, "", id); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range 200 {
		sb, err := s.GetSandbox(ctx, "", id)
		if err != nil {
			t.Fatal(err)
		}
		sb.Metadata["n"] = string(rune('a' + i%26))
		out, err := s.UpdateSandbox(ctx, sb)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.GetSandbox(ctx, "", id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != out.Version || got.Metadata["n"] != sb.Metadata["n"] {
			t.Fatalf("write %d: read version %d metadata %v after the write returned version %d", i, got.Version, got.Metadata, out.Version)
		}
	}
	close(stop)
	wg.Wait()
}

// TestReadCacheHandsOutCopies: changing a record a read returned changes
// nothing another read sees.
func TestReadCacheHandsOutCopies(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	id := newCachedSandbox(t, s)
	a, _ := s.GetSandbox(ctx, "", id)
	a.Metadata["k"] = "changed"
	a.State = sandbox.StateFailed
	b, err := s.GetSandbox(ctx, "", id)
	if err != nil {
		t.Fatal(err)
	}
	if b.Metadata["k"] != "v" || b.State != sandbox.StateCreating {
		t.Errorf("second read saw the first caller's changes: %+v", b)
	}
	if _, err := s.GetSandbox(ctx, "org_other", id); !store.IsNotFound(err) {
		t.Errorf("read of another org's sandbox from the cache: %v, want not found", err)
	}
}

// TestReadCacheSeesOtherProcesses: a commit by another process sharing the
// file (here the sqlite driver on its own, as an operator's tool would) is
// seen by the first read otherProcessesEvery after it, though the record
// was cached: a changed sandbox reads changed, a deleted token stops
// authenticating.
func TestReadCacheSeesOtherProcesses(t *testing.T) {
	if path := os.Getenv("PT_TEST_CACHE_WRITER"); path != "" {
		// The other process: one statement, then exit.
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(os.Getenv("PT_TEST_CACHE_SQL")); err != nil {
			t.Fatal(err)
		}
		return
	}
	path := filepath.Join(t.TempDir(), "platinum.db")
	s, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	id := newCachedSandbox(t, s)
	tok := store.Token{ID: "tok_1", OrgID: "org_default", Role: store.RoleAdmin, Hash: "h1", CreatedAt: time.Now().UTC()}
	if err := s.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	other := func(query string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestReadCacheSeesOtherProcesses$")
		cmd.Env = append(os.Environ(), "PT_TEST_CACHE_WRITER="+path, "PT_TEST_CACHE_SQL="+query)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("other process: %v\n%s", err, out)
		}
		time.Sleep(otherProcessesEvery)
	}
	for i, state := range []string{"running", "stopped", "running"} {
		for range 3 { // cached now, if it can be
			if _, err := s.GetSandbox(ctx, "", id); err != nil {
				t.Fatal(err)
			}
			if _, err := s.TokenByHash(ctx, "h1"); err != nil {
				t.Fatal(err)
			}
		}
		other("UPDATE sandboxes SET state = '" + state + "', version = version + 1 WHERE id = '" + id + "'")
		got, err := s.GetSandbox(ctx, "", id)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.State) != state || got.Version != int64(i+2) {
			t.Fatalf("after another process set state %s: read state %s version %d", state, got.State, got.Version)
		}
	}
	other("DELETE FROM tokens WHERE hash = 'h1'")
	if got, err := s.TokenByHash(ctx, "h1"); !store.IsNotFound(err) {
		t.Fatalf("token deleted by another process still read: %+v, %v", got, err)
	}
}
