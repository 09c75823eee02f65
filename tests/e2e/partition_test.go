package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/apicontract"
	"github.com/platinum-dev/platinum/internal/ptdtest"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// storeLink is one host's way to the PostgreSQL store: a relay of its
// unix socket that the test can cut, as a network partition would.
type storeLink struct {
	ln    net.Listener
	net   string // of to: "unix" or "tcp"
	to    string
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

// linkTo relays a unix socket in a directory of its own to the store
// storeURL names, and returns the link and the URL through it.
func linkTo(t *testing.T, storeURL string) (*storeLink, string) {
	t.Helper()
	u, err := url.Parse(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	socks, _ := filepath.Glob(filepath.Join(q.Get("host"), ".s.PGSQL.[0-9]*[0-9]"))
	if len(socks) != 1 {
		t.Fatalf("no PostgreSQL socket in %s: %v", q.Get("host"), socks)
	}
	dir, err := os.MkdirTemp("", "pt-link-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, filepath.Base(socks[0])))
	if err != nil {
		t.Fatal(err)
	}
	l := &storeLink{ln: ln, net: "unix", to: socks[0]}
	t.Cleanup(func() { ln.Close(); l.set(true) })
	go l.serve()
	q.Set("host", dir)
	u.RawQuery = q.Encode()
	return l, u.String()
}

// linkToURL relays a loopback port to the ptd at apiURL (a joined host's
// way to the store), and returns the link and the URL through it.
func linkToURL(t *testing.T, apiURL string) (*storeLink, string) {
	t.Helper()
	u, err := url.Parse(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &storeLink{ln: ln, net: "tcp", to: u.Host}
	t.Cleanup(func() { ln.Close(); l.set(true) })
	go l.serve()
	return l, "http://" + ln.Addr().String()
}

func (l *storeLink) serve() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		if l.cut {
			l.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial(l.net, l.to)
		if err != nil {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.conns = append(l.conns, c, up)
		l.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go func() { io.Copy(c, up); c.Close() }()
	}
}

// set cuts the link (every connection through it ends, new ones are
// refused) or heals it.
func (l *storeLink) set(cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = cut
	if cut {
		for _, c := range l.conns {
			c.Close()
		}
		l.conns = nil
	}
}

// TestPartitionedHostRunsNothingTwice: host b is alive but cut off from
// the store — its link to PostgreSQL, or, joined, its link to the ptd it
// joined (docs/ARCHITECTURE.md, "Joined hosts"). Before a can mark it lost
// and recover b's backed-up sandbox on its own host, b fences it: the loop
// running in it stops writing to its disk, and does not write again while
// the recovered copy runs on a. When the link heals, b registers again,
// destroys its stale copy, and its API reaches the sandbox on a.
func TestPartitionedHostRunsNothingTwice(t *testing.T) {
	requireEnv(t)
	for _, joined := range []bool{false, true} {
		t.Run(map[bool]string{false: "store_url", true: "joined"}[joined], func(t *testing.T) { partitioned(t, joined) })
	}
}

func partitioned(t *testing.T, joined bool) {
	args := []string{"--pids-limit", "256", "--host-heartbeat", "200ms", "--host-lost-after", "4s",
		"--host-fence-after", "1500ms", "--reconcile-interval", "1s", "--timer-interval", "500ms", "--objects", t.TempDir()}
	token := ptdtest.RandHex(16)
	var a *ptdtest.Daemon
	var link *storeLink
	bOpts := ptdtest.Options{Store: "sqlite"}
	if joined {
		a = startNamed(t, "a", ptdtest.Options{Store: "postgres", ExtraArgs: args, Env: []string{"PT_HOST_TOKEN=" + token}})
		var viaLink string
		link, viaLink = linkToURL(t, a.URL)
		bOpts.Env = []string{"PT_HOST_TOKEN=" + token}
		bOpts.ExtraArgs = append(append([]string{}, args...), "--role", "host", "--join", viaLink)
	} else {
		a = startHosts(t, 1, args...)[0]
		var viaLink string
		link, viaLink = linkTo(t, a.StoreURL)
		bOpts.ExtraArgs = append(append([]string{}, args...), "--store", viaLink)
		bOpts.KeysFrom = a.DataDir
	}
	b, err := ptdtest.Start(bOpts)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ptd b:\n%s", b.Log())
		}
		if err := b.Stop(); err != nil {
			t.Errorf("ptd b: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("ptd b: %v", err)
	}
	t.Cleanup(apicontract.Register(b.URL))
	ctx := context.Background()
	cl := platinum.New(a.URL, a.Token)
	idA, idB := hostIDOf(t, a), hostIDOf(t, b)

	if _, err := cl.Hosts.Drain(ctx, idA); err != nil {
		t.Fatal(err)
	}
	sb, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"}, platinum.WaitForRunning(2*time.Minute))
	if _, err := cl.Hosts.Undrain(ctx, idA); err != nil {
		t.Fatal(err)
	}
	if err != nil || sb.HostID != idB {
		t.Fatalf("create with only b taking sandboxes: %+v %v", sb, err)
	}
	t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), sb.ID) })
	if err := cl.Sandboxes.Upload(ctx, sb.ID, "/root/kept.txt", strings.NewReader("backed up")); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Sandboxes.Backup(ctx, sb.ID, platinum.BackupOptions{Wait: true}); err != nil {
		t.Fatalf("backup: %v", err)
	}
	// A loop that writes to the disk ten times a second, seen from the
	// host in b's copy of the disk.
	h, err := cl.Sandboxes.Connect(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Processes().Start(ctx, platinum.ProcessStartRequest{Shell: "while :; do echo x >> /root/tick; sleep 0.1; done"}); err != nil {
		t.Fatalf("start the loop: %v", err)
	}
	tick := filepath.Join(b.DataDir, "sandboxes", sb.ID, "disk", "upper", "root", "tick")
	size := func() int64 {
		fi, err := os.Stat(tick)
		if err != nil {
			return -1
		}
		return fi.Size()
	}
	grows := func() bool {
		before := size()
		time.Sleep(time.Second)
		return size() > before
	}
	if !grows() {
		t.Fatalf("the loop does not write to %s", tick)
	}

	link.set(true)
	for deadline := time.Now().Add(30 * time.Second); !logLine(b.Log(), "fencing its sandboxes"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("b never fenced itself")
		}
	}
	// a recovers the sandbox from its backup on a.
	var rec *platinum.Sandbox
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if rec, err = cl.Sandboxes.Get(ctx, sb.ID); err == nil && rec.State == platinum.StateRunning && rec.HostID == idA {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox never ran on a: %+v %v", rec, err)
		}
	}
	if grows() {
		t.Fatal("b's copy still runs while the recovered one runs on a")
	}
	res, err := cl.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: "cat /root/kept.txt; test -e /root/tick && echo tick"})
	if err != nil || res.Stdout != "backed up" {
		t.Fatalf("the recovered sandbox on a: %+v %v, want the backed-up file and no loop's file", res, err)
	}

	link.set(false)
	for deadline := time.Now().Add(time.Minute); !logLine(b.Log(), "swept host resources", sb.ID); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("b never destroyed its stale copy")
		}
	}
	if size() != -1 {
		t.Fatalf("b's stale disk is still there (%s)", tick)
	}
	var ae *platinum.APIError
	res, err = platinum.New(b.URL, b.Token).Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: "cat /root/kept.txt"})
	if err != nil || res.Stdout != "backed up" {
		t.Fatalf("the sandbox through b after the link healed: %+v %v (%v)", res, err, errors.As(err, &ae))
	}
}
