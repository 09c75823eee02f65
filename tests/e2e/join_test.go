package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/platinum-dev/platinum/internal/pgtest"
	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/testenv"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestJoinedHosts runs the platform in the roles of docs/ARCHITECTURE.md
// ("Joined hosts"): an api-only ptd holds the store (PostgreSQL) and lets
// hosts join with the host token, and two hosts join it with --role=host
// --join, given neither the store's URL nor keys nor an object store. A
// host with another token is refused. Creates through the api land on both
// hosts; exec and files work through the api and through the other host's
// own API. A killed host is marked lost and its stopped sandbox starts on
// the other from the stop snapshot it wrote to the object store the join
// named; every SSH gateway shows clients the platform's host key, a
// relayed login included; the last host killed is marked lost by the
// api-only ptd alone; a
// host restarted joins again and takes creates; with the platform's ptd
// down, a host's API answers 503.
func TestJoinedHosts(t *testing.T) {
	requireEnv(t)
	common := []string{"--pids-limit", "256", "--host-heartbeat", "200ms", "--host-lost-after", "3s", "--timer-interval", "500ms"}
	api, hosts, joining := startJoined(t, 2, common, nil, nil)

	// A stranger's token is refused at the join, with what to do.
	stranger, err := ptdtest.Start(joining(ptdtest.RandHex(16)))
	if stranger != nil {
		t.Cleanup(func() { stranger.Stop() })
	}
	if err == nil || !strings.Contains(err.Error(), "refused the host token") {
		t.Fatalf("a host with another token: %v, want it refused", err)
	}

	ctx := context.Background()
	cl := platinum.New(api.URL, api.Token)
	ids := map[string]int{}
	for i, h := range hosts {
		ids[hostIDOf(t, h)] = i
		for _, own := range []string{"platinum.db", "secrets.key", "preview.key", "objects"} {
			if _, err := os.Stat(filepath.Join(h.DataDir, own)); err == nil {
				t.Fatalf("joined host %d made %s of its own: it must use the platform's", i, own)
			}
		}
	}
	hs, err := cl.Hosts.List(ctx)
	if err != nil || len(hs) != 2 {
		t.Fatalf("hosts through the api: %+v %v, want the two joined hosts", hs, err)
	}

	boxes := map[int]*platinum.Sandbox{}
	for i := 0; len(boxes) < 2; i++ {
		if i == 4 {
			t.Fatalf("four creates through the api landed on one host only: %v", boxes)
		}
		sb, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", Env: map[string]string{"WHO": fmt.Sprint("box", i)}},
			platinum.WaitForRunning(2*time.Minute))
		if err != nil {
			t.Fatalf("create %d through the api: %v", i, err)
		}
		t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), sb.ID) })
		n, ok := ids[sb.HostID]
		if !ok {
			t.Fatalf("sandbox placed on %q, not a joined host %v", sb.HostID, ids)
		}
		if _, dup := boxes[n]; !dup {
			boxes[n] = sb
		}
	}
	for n, sb := range boxes {
		if err := cl.Sandboxes.Upload(ctx, sb.ID, "/root/f.txt", strings.NewReader(sb.ID)); err != nil {
			t.Fatalf("upload through the api to host %d: %v", n, err)
		}
		res, err := cl.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: "cat /root/f.txt; echo \" $WHO\""})
		if err != nil || !strings.HasPrefix(res.Stdout, sb.ID+" box") {
			t.Fatalf("exec through the api on host %d: %+v %v", n, res, err)
		}
		// A host serves the API too, for every sandbox of the platform.
		other := platinum.New(hosts[1-n].URL, api.Token)
		if got, err := other.Sandboxes.Get(ctx, sb.ID); err != nil || got.HostID != sb.HostID {
			t.Fatalf("host %d's sandbox through host %d: %+v %v", n, 1-n, got, err)
		}
		if res, err := other.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: "cat /root/f.txt"}); err != nil || res.Stdout != sb.ID {
			t.Fatalf("exec on host %d's sandbox through host %d: %+v %v", n, 1-n, res, err)
		}
	}

	t.Run("one ssh host key", func(t *testing.T) { testOneSSHHostKey(t, api, hosts) })

	// Host 0's sandbox stops: its stop snapshot goes to the platform's
	// object store.
	parked := boxes[0]
	if _, err := cl.Sandboxes.Stop(ctx, parked.ID, platinum.WaitForStopped(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		bks, err := cl.Sandboxes.ListBackups(ctx, parked.ID)
		if slices.ContainsFunc(bks, func(b platinum.Snapshot) bool { return b.Name == "pt:stop" && b.State == platinum.SnapshotReady }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stop snapshot of the stopped sandbox: %+v %v", bks, err)
		}
	}
	// Host 0 dies; it is marked lost, and the stopped sandbox starts on
	// host 1 with its file.
	hosts[0].Kill()
	waitHostState(t, cl, parked.HostID, "lost")
	got, err := cl.Sandboxes.Start(ctx, parked.ID, platinum.WaitForRunning(2*time.Minute))
	if err != nil || got.HostID != hostIDOf(t, hosts[1]) {
		t.Fatalf("start of the lost host's stopped sandbox: %+v %v, want running on host 1", got, err)
	}
	if res, err := cl.Sandboxes.Exec(ctx, parked.ID, platinum.ExecRequest{Shell: "cat /root/f.txt"}); err != nil || res.Stdout != parked.ID {
		t.Fatalf("its file after the start on host 1: %+v %v", res, err)
	}
	// Host 1 dies too: with no host left, the api-only ptd marks it lost.
	hosts[1].Kill()
	waitHostState(t, cl, got.HostID, "lost")
	// Host 0 comes back: it joins again and takes sandboxes.
	if err := hosts[0].Restart(); err != nil {
		t.Fatalf("host 0 joining again: %v", err)
	}
	waitHostState(t, cl, parked.HostID, "active")
	if sb, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"}, platinum.WaitForRunning(2*time.Minute)); err != nil || sb.HostID != parked.HostID {
		t.Fatalf("create with host 0 back: %+v %v", sb, err)
	} else {
		t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), sb.ID) })
	}

	// Without the platform's ptd, a host's calls that need the store
	// answer 503, never something else.
	api.Kill()
	var ae *platinum.APIError
	_, err = platinum.New(hosts[0].URL, api.Token).Sandboxes.Get(ctx, parked.ID)
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a host's API with the platform's ptd down: %v, want 503", err)
	}
}

// waitHostState waits until the platform lists host id in state.
func waitHostState(t *testing.T, cl *platinum.Client, id, state string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		hs, err := cl.Hosts.List(context.Background())
		if err == nil && slices.ContainsFunc(hs, func(h platinum.Host) bool { return h.ID == id && h.State == state }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("host %s never %s: %+v %v", id, state, hs, err)
		}
	}
}

// startJoined starts an api-only ptd on PostgreSQL that lets hosts join
// with a fresh host token and its own object store, then n hosts joined to
// it (docs/ARCHITECTURE.md, "Joined hosts"); common flags go to every ptd,
// apiArgs to the api-only one, hostArgs to the hosts. joining(token) is
// how a host joins it, for one more (a stranger's token, say).
func startJoined(t *testing.T, n int, common, apiArgs, hostArgs []string) (api *ptdtest.Daemon, hosts []*ptdtest.Daemon, joining func(token string) ptdtest.Options) {
	t.Helper()
	_, err := pgtest.BinDir()
	testenv.Require(t, err == nil, fmt.Sprint(err))
	token := ptdtest.RandHex(16)
	api = startNamed(t, "api", ptdtest.Options{Store: "postgres", Env: []string{"PT_HOST_TOKEN=" + token},
		ExtraArgs: slices.Concat(common, []string{"--role", "api", "--objects", t.TempDir()}, apiArgs)})
	joining = func(tok string) ptdtest.Options {
		return ptdtest.Options{Store: "sqlite", Env: []string{"PT_HOST_TOKEN=" + tok},
			ExtraArgs: slices.Concat(common, []string{"--role", "host", "--join", api.URL}, hostArgs)}
	}
	for i := range n {
		hosts = append(hosts, startNamed(t, fmt.Sprint("host", i), joining(token)))
	}
	return api, hosts, joining
}

// testOneSSHHostKey: the api-only ptd's and both hosts' SSH gateways show
// clients one host key, the platform's, and an OpenSSH login through one
// host to a sandbox on the other (a relay, which each gateway signs with a
// relay key of its own) passes a strict check against that key alone.
func testOneSSHHostKey(t *testing.T, api *ptdtest.Daemon, hosts []*ptdtest.Daemon) {
	requireSSH(t)
	shown := map[string]ssh.PublicKey{}
	for name, d := range map[string]*ptdtest.Daemon{"api": api, "host0": hosts[0], "host1": hosts[1]} {
		var got ssh.PublicKey
		// The host key is checked before any login: a refused one is enough.
		ssh.Dial("tcp", d.SSHAddr, &ssh.ClientConfig{User: "probe", Auth: []ssh.AuthMethod{ssh.Password("x")}, Timeout: 10 * time.Second,
			HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error { got = key; return nil }})
		if got == nil {
			t.Fatalf("%s's gateway at %s showed no host key", name, d.SSHAddr)
		}
		shown[name] = got
	}
	platform := shown["api"]
	for name, k := range shown {
		if ssh.FingerprintSHA256(k) != ssh.FingerprintSHA256(platform) {
			t.Fatalf("%s's gateway shows %s, the platform's ptd %s: want one host key", name, ssh.FingerprintSHA256(k), ssh.FingerprintSHA256(platform))
		}
	}
	key, pub := sshKey(t, "owner")
	st, m := post(t, api, "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=120000", map[string]any{"template": "busybox", "ssh_keys": []string{pub}})
	if st != 201 {
		t.Fatalf("create with ssh_keys: %d %v", st, m)
	}
	id := m["id"].(string)
	t.Cleanup(func() { platinum.New(api.URL, api.Token).Sandboxes.Delete(context.Background(), id) })
	entry := hosts[0]
	if m["host_id"] == hostIDOf(t, hosts[0]) {
		entry = hosts[1]
	}
	host, port, _ := net.SplitHostPort(entry.SSHAddr)
	login := func(known ssh.PublicKey) (string, string, int) {
		file := filepath.Join(t.TempDir(), "known_hosts")
		if err := os.WriteFile(file, fmt.Appendf(nil, "[%s]:%s %s", host, port, ssh.MarshalAuthorizedKey(known)), 0o600); err != nil {
			t.Fatal(err)
		}
		// OpenSSH takes an option's first value: these go before sshOpts'.
		args := append([]string{"-p", port, "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + file}, sshOpts(key)...)
		return runTool(t, "", "ssh", append(args, id+"@"+host, "echo relayed-$((6*7))")...)
	}
	if out, errOut, code := login(platform); code != 0 || out != "relayed-42\n" {
		t.Fatalf("a relayed login checked against the platform's host key: %d %q %q", code, out, errOut)
	}
	if _, errOut, code := login(sshSigner(t, key).PublicKey()); code != 255 || !strings.Contains(errOut, "verification failed") {
		t.Fatalf("a login expecting another host key: %d %q, want the client's refusal", code, errOut)
	}
}
