package pgtest

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestStartStop starts a cluster of its own, uses a database on it over
// the socket and checks Stop leaves neither a server nor a directory.
func TestStartStop(t *testing.T) {
	ctx := t.Context()
	c, err := Start(ctx)
	if errors.Is(err, ErrUnavailable) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	dsn, err := c.CreateDatabase(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var db, user string
	if err := conn.QueryRow(ctx, "SELECT current_database(), current_user").Scan(&db, &user); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if db != "app" || user != "postgres" {
		t.Errorf("connected to %s as %s, want app as postgres", db, user)
	}
	pid := c.cmd.Process.Pid
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("postgres (pid %d) still runs after Stop: %v", pid, err)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("cluster dir %s left behind: %v", c.Dir, err)
	}
}

// TestNewDatabase gets two databases from the shared cluster: each is
// empty and its own.
func TestNewDatabase(t *testing.T) {
	ctx := t.Context()
	a, b := NewDatabase(t), NewDatabase(t)
	if a == b {
		t.Fatalf("two tests got one database: %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Error("a table created in one database shows in another")
	}
}
