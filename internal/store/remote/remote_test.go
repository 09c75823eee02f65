package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/pgtest"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/postgres"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
	"github.com/platinum-dev/platinum/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

const hostToken = "host-secret"

func authorize(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+hostToken }

// openSQLite opens a store on a new SQLite file; it closes when t ends.
func openSQLite(t *testing.T) store.Store { return openSQLiteB(t) }

func openSQLiteB(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "platinum.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// openPostgres opens a store on a new database of the test cluster (it
// skips t as postgres' own tests do when PostgreSQL is not installed).
func openPostgres(t *testing.T) store.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), pgtest.NewDatabase(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// serve runs a handler for st on a test server that closes when t ends.
func serve(t *testing.T, st store.Store, listen func(context.Context, func())) *httptest.Server {
	return serveListen(t, st, listen)
}

func serveB(t testing.TB, st store.Store) *httptest.Server { return serveListen(t, st, nil) }

func serveListen(t testing.TB, st store.Store, listen func(context.Context, func())) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(Prefix, NewHandler(st, authorize, listen, nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// dial returns a Client of srv with the right token; it closes when t
// ends.
func dial(t *testing.T, srv *httptest.Server) *Client { return dialB(t, srv) }

func dialB(t testing.TB, srv *httptest.Server) *Client {
	t.Helper()
	c, err := Dial(t.Context(), srv.URL, hostToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConformanceSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return dial(t, serve(t, openSQLite(t), nil)) })
}

func TestConformancePostgres(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return dial(t, serve(t, openPostgres(t), nil)) })
}

// TestGeneratedClientIsCurrent fails when client_gen.go is not what
// ./gen writes from store.Store (a store method added, removed or
// changed): go generate ./internal/store/remote rewrites it.
func TestGeneratedClientIsCurrent(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "run", "./gen", "-check").CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./gen -check: %v\n%s", err, out)
	}
}

func TestDialErrors(t *testing.T) {
	srv := serve(t, openSQLite(t), nil)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	tests := []struct {
		name    string
		url     string
		token   string
		wantErr error
		say     string // in the message: what to check
	}{
		{"wrong token", srv.URL, "not-the-token", sandbox.ErrUnauthenticated, "refused the host token"},
		{"no token", srv.URL, "", sandbox.ErrUnauthenticated, "refused the host token"},
		{"not a store", httptest.NewServer(http.NotFoundHandler()).URL, hostToken, sandbox.ErrNotFound, "serves no store"},
		{"a page, not a store", httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, "<!doctype html>")
		})).URL, hostToken, sandbox.ErrNotFound, "serves no store"},
		{"nobody listens", dead.URL, hostToken, sandbox.ErrUnavailable, "cannot reach the api ptd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(t.Context(), tc.url, tc.token, nil)
			if !errors.Is(err, tc.wantErr) || !strings.Contains(fmt.Sprint(err), tc.say) {
				t.Fatalf("Dial: got (%v, %v), want an error wrapping %v that says %q", c, err, tc.wantErr, tc.say)
			}
		})
	}
}

// TestRefusedCallChangesNothing: a call with a wrong token is refused
// with 401 before it runs.
func TestRefusedCallChangesNothing(t *testing.T) {
	st := openSQLite(t)
	srv := serve(t, st, nil)
	c := dial(t, srv)
	c.token = "stolen-or-stale"
	err := c.CreateOrg(t.Context(), store.Org{ID: "org_x", Name: "x"})
	if !errors.Is(err, sandbox.ErrUnauthenticated) || !strings.Contains(err.Error(), "host token was refused") {
		t.Fatalf("CreateOrg with a wrong token: %v", err)
	}
	if _, err := st.GetOrg(t.Context(), "org_x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused call wrote: GetOrg = %v", err)
	}
}

func TestKilledServerIsUnavailable(t *testing.T) {
	srv := serve(t, openSQLite(t), nil)
	c := dial(t, srv)
	if err := c.CreateOrg(t.Context(), store.Org{ID: "org_a", Name: "a"}); err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections()
	srv.Close()
	_, err := c.GetOrg(t.Context(), "org_a")
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("GetOrg of a killed server: %v, want ErrUnavailable", err)
	}
	unlock, err := c.LockKey(t.Context(), "k")
	if !errors.Is(err, sandbox.ErrUnavailable) || unlock != nil {
		t.Fatalf("LockKey of a killed server: %v, want ErrUnavailable", err)
	}
}

func TestClosedClient(t *testing.T) {
	c := dial(t, serve(t, openSQLite(t), nil))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetOrg(t.Context(), "org_a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("GetOrg after Close: %v, want ErrClosed", err)
	}
}

// TestErrorCategories: every category a store error wraps comes back as
// the same category, with the server's message.
func TestErrorCategories(t *testing.T) {
	for _, c := range categories {
		t.Run(c.code, func(t *testing.T) {
			in := fmt.Errorf("thing %q: %w", "x", c.err)
			we, _ := toWire(in)
			out := fromWire(we)
			if !errors.Is(out, c.err) || out.Error() != in.Error() {
				t.Fatalf("%v came back as %v", in, out)
			}
		})
	}
	if out := fromWire(must(toWire(errors.New("disk on fire")))); out.Error() != "disk on fire" || errors.Is(out, sandbox.ErrUnavailable) {
		t.Fatalf("an uncategorised error came back as %v", out)
	}
}

func must(w *wireError, _ int) *wireError { return w }

// TestLockKeyReleasedWhenHolderGoes: a lock held through a client whose
// connection dies (its host crashed) is released, and another client
// takes it; a wait for a held lock ends with its ctx.
func TestLockKeyReleasedWhenHolderGoes(t *testing.T) {
	srv := serve(t, openSQLite(t), nil)
	holder, other := dial(t, srv), dial(t, srv)
	// The holder's connections, so the test can cut them as a crash would.
	var mu sync.Mutex
	var conns []net.Conn
	tr := holder.hc.Transport.(*http.Transport)
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}
	tr.CloseIdleConnections()
	if _, err := holder.LockKey(t.Context(), "quota/org_a"); err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := other.LockKey(wctx, "quota/org_a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockKey of a held key: %v, want the wait to end with its ctx", err)
	}

	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	unlock, err := other.LockKey(t.Context(), "quota/org_a")
	if err != nil {
		t.Fatalf("LockKey after the holder's connection died: %v", err)
	}
	unlock()
	unlock() // twice is harmless
	again, err := holder.LockKey(t.Context(), "quota/org_a")
	if err != nil {
		t.Fatalf("LockKey after unlock: %v", err)
	}
	again()
}

// TestLockKeyHoldOutlivesCtx: as with a local store, ctx bounds the wait
// for a lock, not how long it is held.
func TestLockKeyHoldOutlivesCtx(t *testing.T) {
	c := dial(t, serve(t, openSQLite(t), nil))
	ctx, cancel := context.WithCancel(t.Context())
	unlock, err := c.LockKey(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	wctx, wcancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer wcancel()
	if _, err := c.LockKey(wctx, "k"); err == nil {
		t.Fatal("the lock was released when the ctx it was taken with ended")
	}
	unlock()
	again, err := c.LockKey(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	again()
}

// commits is a store that tells listeners of its AddEvent commits, as a
// PostgreSQL store's ListenEvents tells of every process's.
type commits struct {
	store.Store
	mu   sync.Mutex
	subs map[*func()]bool
}

func (c *commits) AddEvent(ctx context.Context, orgID, sandboxID, typ string, data any) error {
	err := c.Store.AddEvent(ctx, orgID, sandboxID, typ, data)
	c.mu.Lock()
	for f := range c.subs {
		(*f)()
	}
	c.mu.Unlock()
	return err
}

func (c *commits) listen(ctx context.Context, notify func()) {
	c.mu.Lock()
	c.subs[&notify] = true
	c.mu.Unlock()
	notify() // as PostgreSQL's listen wakes once it listens
	<-ctx.Done()
	c.mu.Lock()
	delete(c.subs, &notify)
	c.mu.Unlock()
}

func TestListenEventsAcrossClients(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(*testing.T) store.Store
	}{{"sqlite", openSQLite}, {"postgres", openPostgres}} {
		t.Run(tc.name, func(t *testing.T) {
			var listen func(context.Context, func())
			st := tc.open(t)
			if pg, ok := st.(interface {
				ListenEvents(context.Context, func())
			}); ok {
				listen = pg.ListenEvents
			} else {
				cs := &commits{Store: st, subs: map[*func()]bool{}}
				st, listen = cs, cs.listen
			}
			srv := serve(t, st, listen)
			reader, writer := dial(t, srv), dial(t, srv)
			ctx, cancel := context.WithCancel(t.Context())
			woke := make(chan struct{}, 64)
			done := make(chan struct{})
			go func() { defer close(done); reader.ListenEvents(ctx, func() { woke <- struct{}{} }) }()
			defer func() { cancel(); <-done }()
			wait := func(what string) {
				t.Helper()
				select {
				case <-woke:
				case <-time.After(30 * time.Second):
					t.Fatalf("no wake for %s", what)
				}
			}
			wait("the connection")
			wait("the server's listen starting") // then every commit is seen
			if err := writer.AddEvent(ctx, "org_a", "sbx_1", "hello", map[string]string{"k": "v"}); err != nil {
				t.Fatal(err)
			}
			wait("a commit through another client")
			evs, err := writer.Events(ctx, 0, 0)
			if err != nil || len(evs) != 1 || evs[0].Data != `{"k":"v"}` {
				t.Fatalf("Events after AddEvent: %+v, %v", evs, err)
			}
		})
	}
}

// TestListenEventsWithoutListen: a server that passes on no commits
// makes ListenEvents return (readers poll).
func TestListenEventsWithoutListen(t *testing.T) {
	c := dial(t, serve(t, openSQLite(t), nil))
	c.ListenEvents(t.Context(), func() {})
}

// TestModifySandboxAcrossClients: two hosts' clients modifying one
// sandbox lose neither's change, and fn's own error comes back as is.
func TestModifySandboxAcrossClients(t *testing.T) {
	srv := serve(t, openSQLite(t), nil)
	a, b := dial(t, srv), dial(t, srv)
	ctx := t.Context()
	sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: "org_a", State: sandbox.StateRunning, Template: "busybox"}
	if err := a.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused by fn")
	if _, err := a.ModifySandbox(ctx, "org_a", sb.ID, func(*sandbox.Sandbox) error { return refused }); err != refused {
		t.Fatalf("ModifySandbox with a failing fn: %v, want fn's error as is", err)
	}
	var wg sync.WaitGroup
	for i, c := range []*Client{a, b, a, b, a, b} {
		wg.Go(func() {
			_, err := c.ModifySandbox(ctx, "org_a", sb.ID, func(s *sandbox.Sandbox) error {
				s.Metadata[fmt.Sprint("k", i)] = "v" // non-nil: the store's convention
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := a.GetSandbox(ctx, "org_a", sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Metadata) != 6 || got.Version != 7 {
		t.Fatalf("after six concurrent modifies: metadata %v, version %d; want six keys, version 7", got.Metadata, got.Version)
	}
}

// TestModifySandboxRetries pins the client's compare-and-swap loop: a
// write of another process between its read and its write makes it run
// fn again on the fresh record, keeping both changes; a name another
// sandbox holds is the conflict it returns, after one run of fn.
func TestModifySandboxRetries(t *testing.T) {
	srv := serve(t, openSQLite(t), nil)
	a, b := dial(t, srv), dial(t, srv)
	ctx := t.Context()
	mk := func(name string) sandbox.Sandbox {
		sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: "org_a", Name: name, State: sandbox.StateRunning, Template: "busybox"}
		if err := a.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		return sb
	}
	sb, taken := mk("one"), mk("two")

	calls := 0
	out, err := a.ModifySandbox(ctx, "org_a", sb.ID, func(s *sandbox.Sandbox) error {
		if calls++; calls == 1 { // another process writes meanwhile
			cur, err := b.GetSandbox(ctx, "org_a", sb.ID)
			if err != nil {
				return err
			}
			cur.Metadata["by"] = "b"
			if _, err := b.UpdateSandbox(ctx, cur); err != nil {
				return err
			}
		}
		s.Metadata["by_a"] = "a"
		return nil
	})
	if err != nil || calls != 2 || out.Metadata["by"] != "b" || out.Metadata["by_a"] != "a" || out.Version != 3 {
		t.Fatalf("ModifySandbox raced by a write: %d runs of fn, %v, %v; want 2 runs and both changes at version 3", calls, out.Metadata, err)
	}

	calls = 0
	_, err = a.ModifySandbox(ctx, "org_a", sb.ID, func(s *sandbox.Sandbox) error {
		calls++
		s.Name = taken.Name
		return nil
	})
	if !errors.Is(err, store.ErrConflict) || calls != 1 {
		t.Fatalf("ModifySandbox to a taken name: %v after %d runs of fn, want ErrConflict after 1", err, calls)
	}
	if got, _ := a.GetSandbox(ctx, "org_a", sb.ID); got.Name != "one" || got.Version != 3 {
		t.Fatalf("a refused rename wrote: %+v", got)
	}
}
