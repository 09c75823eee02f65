package e2e

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
)

// TestSecondDaemonSharingTheNetworkRefusesToStart: a second ptd on this
// machine with its own data dir but the running one's bridge, address
// pool or cgroup parent (what two ptd with default flags share) exits at
// once with an error naming the running ptd and the flags to change,
// instead of dying later on a bind or, worse, rewiring the first one's
// bridge; the first keeps serving and its sandboxes keep their network.
func TestSecondDaemonSharingTheNetworkRefusesToStart(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})
	gw := strings.TrimSpace(c.mustSh(id, "ip route | awk '/default/ {print $3}'"))
	for _, tc := range []struct {
		name              string
		bridge, subnet    string
		cgroup            string
		wantFlags, wantIn []string
	}{
		{"same flags", env.bridge, env.subnet, env.cgroup, []string{"--bridge", "--subnet", "--cgroup-parent"}, []string{"bridge " + env.bridge}},
		{"same bridge", env.bridge, "100.127.250.0/24", "/platinum-test-other-" + randHex(3), []string{"--bridge"}, []string{"bridge " + env.bridge}},
		{"overlapping pool", "pttx" + randHex(2), env.subnet, "/platinum-test-other-" + randHex(3), []string{"--subnet"}, []string{"address pool " + env.subnet}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := os.MkdirTemp("/var/tmp", "pt-data-second-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			cmd := exec.CommandContext(ctx, filepath.Join(env.binDir, "ptd"), "serve", "--data-dir", dir, "--listen", addr,
				"--preview-listen", "", "--bridge", tc.bridge, "--subnet", tc.subnet, "--cgroup-parent", tc.cgroup, "--default-runtime", "runc")
			cmd.Env = append(os.Environ(), "PT_TOKEN=pt_test_second")
			out, err := cmd.CombinedOutput()
			if err == nil || ctx.Err() != nil {
				t.Fatalf("second ptd did not refuse to start (err %v):\n%s", err, out)
			}
			msg := string(out)
			for _, want := range append(append([]string{"another ptd", env.dataDir}, tc.wantFlags...), tc.wantIn...) {
				if !strings.Contains(msg, want) {
					t.Errorf("second ptd's error lacks %q:\n%s", want, msg)
				}
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("the refused ptd wrote to its data dir: %v", entries)
			}
		})
	}
	// The first one is untouched: it serves, and the sandbox still reaches
	// the sandbox API on its gateway.
	if r := c.do("GET", "/healthz", nil); r.Status != 200 {
		t.Errorf("first ptd after the refusals: %d %s", r.Status, r.Body)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(env.url, "http://"))
	if out := c.sh(id, `printf 'GET /healthz HTTP/1.0\r\n\r\n' | nc -w 3 `+gw+` `+port).Stdout; !strings.Contains(out, " 200 ") {
		t.Errorf("sandbox no longer reaches the API on its gateway %s:%s: %q", gw, port, out)
	}
}

// TestBusyMetricsPortRefusesTheStart: a ptd whose metrics port another
// process holds exits naming that listener before its host registers or
// its API answers, so no test harness or load balancer sees it healthy an
// instant before it dies, and no host of it is left in the store for the
// others to mark lost.
func TestBusyMetricsPortRefusesTheStart(t *testing.T) {
	requireEnv(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	d, err := ptdtest.Start(ptdtest.Options{Store: "sqlite", ExtraArgs: []string{"--metrics-listen", busy.Addr().String()}})
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("refused ptd: %v", err)
		}
	})
	if err == nil || !strings.Contains(err.Error(), "metrics listener") {
		t.Fatalf("start with the metrics port taken: %v, want it refused naming the metrics listener", err)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(d.DataDir, "platinum.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if hosts, err := st.ListHosts(ctx); err != nil || len(hosts) != 0 {
		t.Errorf("hosts registered by the refused ptd: %+v %v, want none", hosts, err)
	}
}
