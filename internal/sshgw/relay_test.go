package sshgw

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// fakeBackend allows keys for sandboxes and serves direct-tcpip to echo
// (the only channel that needs no agent).
type fakeBackend struct {
	keys  map[string]ssh.PublicKey // sandbox ID → its one key
	echo  string                   // "" refuses every port
	mu    sync.Mutex
	ports int
}

func (b *fakeBackend) SSHLogin(_ context.Context, id string, key ssh.PublicKey) (controlplane.Principal, error) {
	if k, ok := b.keys[id]; ok && string(k.Marshal()) == string(key.Marshal()) {
		return controlplane.Principal{OrgID: "org_a"}, nil
	}
	return controlplane.Principal{}, sandbox.ErrUnauthenticated
}

func (b *fakeBackend) AutoResume(context.Context, string, time.Duration) (sandbox.Sandbox, error) {
	return sandbox.Sandbox{State: sandbox.StateRunning}, nil
}

func (b *fakeBackend) OpenTerminal(context.Context, controlplane.Principal, string, controlplane.ProcessRequest) (*controlplane.Terminal, error) {
	return nil, errors.New("no terminals here")
}

func (b *fakeBackend) SandboxPortAddr(context.Context, controlplane.Principal, string, int) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ports++
	if b.echo == "" {
		return "", errors.New("not this ptd's sandbox")
	}
	return b.echo, nil
}

// memLeases is the store's leases in memory.
type memLeases struct {
	mu sync.Mutex
	m  map[string]store.Lease
}

func (l *memLeases) AcquireLease(_ context.Context, name, holder string, ttl time.Duration) (store.Lease, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.m[name]
	if ok && cur.Holder != holder && cur.ExpiresAt.After(time.Now()) {
		return cur, false, nil
	}
	cur = store.Lease{Name: name, Holder: holder, ExpiresAt: time.Now().Add(ttl)}
	l.m[name] = cur
	return cur, true, nil
}

func (l *memLeases) ListLeases(_ context.Context, prefix string) ([]store.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []store.Lease
	for n, v := range l.m {
		if strings.HasPrefix(n, prefix) {
			out = append(out, v)
		}
	}
	return out, nil
}

// peersMap places sandboxes on hosts.
type peersMap struct {
	mu sync.Mutex
	m  map[string]store.HostRecord
}

func (p *peersMap) Peer(_ context.Context, id string) (store.HostRecord, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.m[id]
	return h, ok
}

func (p *peersMap) set(id string, h store.HostRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[id] = h
}

func (b *fakeBackend) portLookups() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ports
}

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// echoServer answers every connection with what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// TestRelayToTheSandboxesHost: a login at the entry gateway for a
// sandbox of another host is checked there, then relayed to that host's
// gateway (over its API listener's upgrade), which serves the channel;
// a key the sandbox does not hold is refused at the entry; the host
// refuses a relay whose key no ptd holds as relay key, or that names a
// key the sandbox does not hold; the entry refuses a host whose key is
// not that host's relay key. Both gateways show clients one platform host
// key and relay with keys of their own, so the shared key is no relay key.
func TestRelayToTheSandboxesHost(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	id := sandbox.NewID(sandbox.PrefixSandbox)
	user, stranger := newSigner(t), newSigner(t)
	keys := map[string]ssh.PublicKey{id: user.PublicKey()}
	leases := &memLeases{m: map[string]store.Lease{}}
	platform, entryRelay := newSigner(t), newSigner(t)

	ownerBE := &fakeBackend{keys: keys, echo: echoServer(t)}
	owner := New(ownerBE, platform, log)
	owner.SetPeers(&peersMap{m: map[string]store.HostRecord{}}, leases, "host_b", newSigner(t))
	owner.peers.advertise(ctx, owner.relayKey.PublicKey())
	ownerAPI := httptest.NewServer(http.HandlerFunc(owner.ServeRelay))
	t.Cleanup(ownerAPI.Close)

	entryBE := &fakeBackend{keys: keys}
	entry := New(entryBE, platform, log)
	hosts := &peersMap{m: map[string]store.HostRecord{id: {ID: "host_b", URL: ownerAPI.URL}}}
	entry.SetPeers(hosts, leases, "host_a", entryRelay)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- entry.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })

	dial := func(key ssh.Signer) (*ssh.Client, error) {
		return ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{User: id, Auth: []ssh.AuthMethod{ssh.PublicKeys(key)},
			HostKeyCallback: ssh.FixedHostKey(platform.PublicKey()), Timeout: 10 * time.Second})
	}
	echo := func(c *ssh.Client) error {
		conn, err := c.Dial("tcp", "127.0.0.1:8080")
		if err != nil {
			return err
		}
		defer conn.Close()
		fmt.Fprint(conn, "ping")
		b := make([]byte, 4)
		if _, err := io.ReadFull(conn, b); err != nil || string(b) != "ping" {
			return fmt.Errorf("echo: %q %v", b, err)
		}
		return nil
	}

	// Serve advertised the entry's relay key before accepting.
	c, err := dial(user)
	if err != nil {
		t.Fatalf("login with the sandbox's key: %v", err)
	}
	if err := echo(c); err != nil {
		t.Fatalf("port forward through the relay: %v", err)
	}
	c.Close()
	if entryBE.portLookups() != 0 || ownerBE.portLookups() != 1 {
		t.Fatalf("port lookups: entry %d, owner %d; want the owner's only", entryBE.portLookups(), ownerBE.portLookups())
	}
	if _, err := dial(stranger); err == nil {
		t.Fatal("a key the sandbox does not hold logged in at the entry")
	}

	relayAs := func(key ssh.Signer, named ssh.PublicKey) error {
		cl, err := dialRelay(ownerAPI.URL, id, named, key)
		if err == nil {
			cl.Close()
		}
		return err
	}
	if err := relayAs(entryRelay, user.PublicKey()); err != nil {
		t.Fatalf("a relay by the entry naming the sandbox's key: %v", err)
	}
	for name, key := range map[string]ssh.Signer{"a user's": user, "the platform host key": platform} {
		if err := relayAs(key, user.PublicKey()); err == nil {
			t.Fatalf("the host took a relay signed with %s, no ptd's relay key", name)
		}
	}
	if err := relayAs(entryRelay, stranger.PublicKey()); err == nil {
		t.Fatal("the host took a relay naming a key the sandbox does not hold")
	}

	// The record names a host whose relay key is not the key that
	// answers there: the entry refuses it, and the channel says why.
	hosts.set(id, store.HostRecord{ID: "host_x", URL: ownerAPI.URL})
	c, err = dial(user)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := echo(c); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("a host with another's key: %v, want the channel refused", err)
	}
}

// dialRelay opens a relayed connection to the ptd at apiURL as another
// ptd would: named is the client's key, signer the relaying key.
func dialRelay(apiURL, id string, named ssh.PublicKey, signer ssh.Signer) (*ssh.Client, error) {
	addr := strings.TrimPrefix(apiURL, "http://")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: %s\r\n%s: %s\r\n\r\n", RelayPath, addr, relayProto,
		HeaderUserKey, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(named))))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		c.Close()
		return nil, fmt.Errorf("upgrade: %v %v", resp, err)
	}
	cc, chans, reqs, err := ssh.NewClientConn(&bufConn{Conn: c, r: br}, addr, &ssh.ClientConfig{User: id,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		c.Close()
		return nil, err
	}
	return ssh.NewClient(cc, chans, reqs), nil
}
