// Package pgtest runs throwaway PostgreSQL clusters for tests: initdb into
// a temporary directory, a server that listens only on a unix socket in
// that directory, everything removed when the test binary (or the daemon
// that asked for it) is done. It uses the PostgreSQL binaries of Debian's
// postgresql package (scripts/setup.sh installs it for tests). As root the
// server runs as the postgres user, which PostgreSQL requires.
//
// Store tests share one cluster per test binary and take a fresh database
// per test (NewDatabase, with Main in TestMain); harnesses that run ptd
// processes start a cluster of their own (Start).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/testproc"
)

// Cluster is a running throwaway PostgreSQL server.
type Cluster struct {
	// Dir holds the data directory (Dir/data), the server's log
	// (Dir/postgres.log) and its socket.
	Dir    string
	cmd    *exec.Cmd
	exited <-chan struct{}

	mu  sync.Mutex
	dbs int
}

const (
	dirPrefix = "pgtest-"
	ownerFile = "owner-pid"
	// superuser is the cluster's only role; it trusts local connections.
	superuser = "postgres"
)

// ErrUnavailable is returned by Start when no PostgreSQL server binaries
// are installed.
var ErrUnavailable = errors.New("pgtest: PostgreSQL is not installed (scripts/setup.sh with PT_SETUP_TESTS=1 installs Debian's postgresql)")

// BinDir returns the directory of initdb and postgres: $PT_PG_BINDIR, else
// the newest /usr/lib/postgresql/<version>/bin (Debian keeps them off
// PATH), else wherever PATH finds initdb.
func BinDir() (string, error) {
	if d := os.Getenv("PT_PG_BINDIR"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(dirs, func(a, b string) int { return version(a) - version(b) })
	if len(dirs) > 0 {
		return filepath.Dir(dirs[len(dirs)-1]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrUnavailable
}

// version is the major version in /usr/lib/postgresql/<version>/bin/initdb.
func version(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

// Start initialises and starts a cluster. Stop it when done. Clusters
// left behind by test processes that died first are removed on the way.
func Start(ctx context.Context) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	sweepDead()
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgtest: PostgreSQL refuses to run as root and there is no postgres user to run it as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
	}
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir}
	fail := func(err error) (*Cluster, error) {
		c.Stop()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fail(err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
	}
	env := append(os.Environ(), "LC_ALL=C", "LANG=C")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"),
		"-U", superuser, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Env = env
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("pgtest: initdb: %v\n%s", err, out))
	}
	logf, err := os.OpenFile(filepath.Join(dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	defer logf.Close()
	// Durability is not what tests check: without fsync a test cluster
	// costs little disk time on a busy machine. Only the socket listens.
	c.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", filepath.Join(dir, "data"), "-k", dir,
		"-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300", "-c", "shared_buffers=32MB", "-c", "unix_socket_permissions=0777")
	c.cmd.Env = env
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	// SIGQUIT (immediate shutdown) if the test process dies first.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	if c.exited, err = testproc.Start(c.cmd); err != nil {
		return fail(fmt.Errorf("pgtest: postgres: %w", err))
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err == nil {
			conn.Close(ctx)
			return c, nil
		}
		select {
		case <-c.exited:
			return fail(fmt.Errorf("pgtest: postgres exited:\n%s", c.Log()))
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("pgtest: postgres did not accept connections: %v\n%s", err, c.Log()))
		}
	}
}

// DSN is the URL of database db on the cluster, over its socket.
func (c *Cluster) DSN(db string) string {
	return "postgres://" + superuser + "@/" + url.PathEscape(db) + "?host=" + url.QueryEscape(c.Dir) + "&sslmode=disable"
}

// CreateDatabase creates an empty database and returns its DSN.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return c.DSN(name), nil
}

// DropDatabase drops a database, ending its connections.
func (c *Cluster) DropDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// Log returns what the server has logged.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "postgres.log"))
	return string(b)
}

// Stop shuts the server down (fast shutdown, then SIGKILL after 15 s) and
// removes its directory. It is nil-safe and may be called twice.
func (c *Cluster) Stop() error {
	if c == nil {
		return nil
	}
	if c.cmd != nil && c.cmd.Process != nil {
		testproc.Stop(c.cmd.Process, c.exited, syscall.SIGINT)
	}
	return os.RemoveAll(c.Dir)
}

// sweepDead removes clusters whose test process is gone (killed before its
// cleanup ran): their server got SIGQUIT already, unless it outlived it.
func sweepDead() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || pid <= 0 || alive(pid) {
			continue
		}
		if pm, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
			first, _, _ := strings.Cut(string(pm), "\n")
			if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && pid > 0 && alive(pid) {
				syscall.Kill(pid, syscall.SIGQUIT)
				for range 100 {
					if !alive(pid) {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}
		os.RemoveAll(dir)
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// The test binary's shared cluster, started by the first NewDatabase.
var shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Main runs a test binary's tests and then stops the shared cluster, if
// any test started it. Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if shared.c != nil {
		if err := shared.c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
	return code
}

// NewDatabase returns the DSN of a new, empty database on the test
// binary's shared cluster (started on first use; Main stops it), dropped
// when t ends. Without PostgreSQL it skips t, or fails it under CI=true.
func NewDatabase(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() { shared.c, shared.err = Start(context.Background()) })
	if shared.err != nil {
		if errors.Is(shared.err, ErrUnavailable) && os.Getenv("CI") != "true" {
			t.Skip(shared.err)
		}
		t.Fatal(shared.err)
	}
	c := shared.c
	c.mu.Lock()
	c.dbs++
	name := "test_" + strconv.Itoa(c.dbs)
	c.mu.Unlock()
	dsn, err := c.CreateDatabase(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.DropDatabase(context.Background(), name); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return dsn
}
