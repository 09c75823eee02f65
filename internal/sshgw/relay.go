package sshgw

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/platinum-dev/platinum/internal/store"
)

// Relaying (docs/ARCHITECTURE.md, "Many hosts"). A client logs in at any
// ptd of the store; when its sandbox runs on another live host, the ptd
// it reached (the entry) checks the client's key against the sandbox's
// ssh_keys as for its own sandboxes, then opens an SSH connection of its
// own to the sandbox host's gateway, carried over that ptd's API listener
// (an HTTP upgrade at RelayPath: the URL the host registered is the one
// address every ptd of the store reaches), and relays every channel and
// request both ways. The user's name is the sandbox ID; the entry
// authenticates with its relay key, and names the client's
// key in HeaderUserKey. The host accepts the connection only when the
// entry's key is a relay key of a ptd of the store (below) and the named
// key is, again, one of the sandbox's ssh_keys: a key the sandbox's org
// did not give is refused at both. The entry accepts the host only when
// its host key is that host's relay key.
//
// Relay keys: every ptd with a gateway on a shared store has one of its
// own (its data dir's host key; the host key clients see may be the
// platform's, shared by every gateway) and holds the lease
// relayLeasePrefix+<its SHA256 fingerprint>, renewed while it runs, with
// its host ID as holder. A key counts as long as its lease has not
// expired. On relays each gateway shows its relay key as its host key.

const (
	// RelayPath is where a ptd's API listener takes relayed SSH
	// connections (ServeRelay).
	RelayPath = "/_pt/ssh-relay"
	// HeaderUserKey names, on a relay, the key the client logged in with
	// (authorized_keys form).
	HeaderUserKey = "Pt-SSH-User-Key"
	// relayProto is the upgrade's protocol name.
	relayProto = "pt-ssh-relay"

	relayLeasePrefix = "ssh/relay/"
	relayLeaseTTL    = time.Minute
)

// Peers finds the host that runs a sandbox when that is another live
// host of the store (*forward.Router implements it).
type Peers interface {
	Peer(ctx context.Context, id string) (store.HostRecord, bool)
}

// Leases is what relay keys need of the store.
type Leases interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, bool, error)
	ListLeases(ctx context.Context, prefix string) ([]store.Lease, error)
}

type peering struct {
	router Peers
	leases Leases
	// self is this ptd's ID (its host's, or the api-only ptd's name): the
	// holder of its relay key's lease.
	self string
}

// SetPeers makes the gateway relay logins to other hosts' sandboxes and
// take relayed ones, with self as this ptd's ID and relayKey its relay key
// (nil: its host key). Without it (a ptd alone on its store) every login
// is served here and no relay is accepted. The relay key must be this
// ptd's own: gateways may show clients one platform host key, but each is
// told apart from the others by its relay key.
func (s *Server) SetPeers(router Peers, leases Leases, self string, relayKey ssh.Signer) {
	s.peers = &peering{router: router, leases: leases, self: self}
	if relayKey != nil {
		s.relayKey = relayKey
	}
}

// advertise takes this ptd's relay key lease now, then keeps it until
// ctx ends. While this data dir's previous ptd holds it (until it expires:
// it still counts meanwhile) it is taken as soon as it expires; while the
// store does not answer, relays through this ptd fail, saying so.
func (p *peering) advertise(ctx context.Context, key ssh.PublicKey) {
	name := relayLeasePrefix + ssh.FingerprintSHA256(key)
	take := func() time.Duration {
		l, ok, err := p.leases.AcquireLease(ctx, name, p.self, relayLeaseTTL)
		if err == nil && !ok {
			return min(max(time.Until(l.ExpiresAt), 0)+100*time.Millisecond, relayLeaseTTL/4)
		}
		return relayLeaseTTL / 4
	}
	next := take()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(next):
				next = take()
			}
		}
	}()
}

// trusted reports whether key is the relay key of a running ptd of the
// store, of the one whose ID is holder when holder is not empty.
func (p *peering) trusted(ctx context.Context, key ssh.PublicKey, holder string) bool {
	name := relayLeasePrefix + ssh.FingerprintSHA256(key)
	ls, err := p.leases.ListLeases(ctx, name)
	if err != nil {
		return false
	}
	now := time.Now()
	for _, l := range ls {
		if l.Name == name && l.ExpiresAt.After(now) && (holder == "" || l.Holder == holder) {
			return true
		}
	}
	return false
}

// ServeRelay takes an SSH connection another ptd relays (RelayPath): an
// HTTP upgrade, then SSH whose login must pass both checks above. It
// answers 404 when this gateway takes no relays.
func (s *Server) ServeRelay(w http.ResponseWriter, r *http.Request) {
	if s.peers == nil {
		http.Error(w, "this ptd's SSH gateway takes no relays", http.StatusNotFound)
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), relayProto) {
		http.Error(w, "want Upgrade: "+relayProto, http.StatusBadRequest)
		return
	}
	user, _, _, _, err := ssh.ParseAuthorizedKey([]byte(r.Header.Get(HeaderUserKey)))
	if err != nil {
		http.Error(w, HeaderUserKey+" must be a public key in authorized_keys form", http.StatusBadRequest)
		return
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "cannot take over the connection", http.StatusInternalServerError)
		return
	}
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + relayProto + "\r\n\r\n")
	if err := brw.Flush(); err != nil {
		c.Close()
		return
	}
	cfg := s.serverConfig(s.relayKey, func(ctx context.Context, _ ssh.ConnMetadata, key ssh.PublicKey) (ssh.PublicKey, error) {
		if !s.peers.trusted(ctx, key, "") {
			return nil, errDenied
		}
		return user, nil
	})
	conn := &bufConn{Conn: c, r: brw.Reader}
	s.track(conn, func() { s.serveConn(context.WithoutCancel(r.Context()), conn, cfg, true) })
}

// relay serves a client's connection whose sandbox runs on host h: every
// channel the client opens is opened on h's gateway and relayed.
func (s *Server) relay(ctx context.Context, sc *ssh.ServerConn, chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request, h store.HostRecord) {
	go ssh.DiscardRequests(reqs)
	cl, err := s.dialPeer(ctx, h, sc.User(), sc.Permissions.Extensions[extKey])
	if err != nil {
		s.log.Warn("ssh relay: the sandbox's host does not answer", "sandbox", sc.User(), "host", h.ID, "err", err)
		for nc := range chans {
			go refuse(nc, "the sandbox's host "+h.ID+" does not answer; retry in a few seconds")
		}
		return
	}
	defer cl.Close()
	go func() {
		cl.Wait() // the host's side ended: so does the client's
		sc.Close()
	}()
	var wg sync.WaitGroup
	for nc := range chans {
		wg.Go(func() { relayChannel(cl, nc) })
	}
	cl.Close()
	wg.Wait()
}

// refuse answers a channel that cannot be served with msg: a session
// runs its command as one that prints msg and exits 255 (an OpenSSH client
// shows a refused channel's reason only at log level INFO); any other
// channel is refused with it.
func refuse(nc ssh.NewChannel, msg string) {
	if nc.ChannelType() != "session" {
		nc.Reject(ssh.ConnectionFailed, "platinum: "+msg)
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	for req := range reqs {
		switch req.Type {
		case "shell", "exec", "subsystem":
			req.Reply(true, nil)
			fmt.Fprintf(ch.Stderr(), "platinum: %s\r\n", msg)
			exitStatus(ch, 255)
			return
		default:
			req.Reply(req.Type == "env" || req.Type == "pty-req", nil)
		}
	}
}

// relayChannel opens nc's like on the host and pumps data, stderr and
// requests both ways until the host closes it.
func relayChannel(cl *ssh.Client, nc ssh.NewChannel) {
	up, upReqs, err := cl.OpenChannel(nc.ChannelType(), nc.ExtraData())
	if err != nil {
		var oe *ssh.OpenChannelError
		if errors.As(err, &oe) {
			nc.Reject(oe.Reason, oe.Message)
		} else {
			nc.Reject(ssh.ConnectionFailed, "platinum: the sandbox's host: "+err.Error())
		}
		return
	}
	defer up.Close()
	down, downReqs, err := nc.Accept()
	if err != nil {
		return
	}
	defer down.Close()
	go func() {
		io.Copy(up, down)
		up.CloseWrite()
	}()
	go pipeRequests(up, downReqs)
	// Output ends at the host's EOF (both streams), then EOF goes on;
	// the channel ends when the host closes it (its requests end).
	var out sync.WaitGroup
	out.Go(func() { io.Copy(down, up) })
	out.Go(func() { io.Copy(down.Stderr(), up.Stderr()) })
	done := make(chan struct{})
	go func() {
		pipeRequests(down, upReqs)
		close(done)
	}()
	out.Wait()
	down.CloseWrite()
	<-done
}

// pipeRequests sends every request of reqs on to dst, with dst's answer.
func pipeRequests(dst ssh.Channel, reqs <-chan *ssh.Request) {
	for r := range reqs {
		ok, err := dst.SendRequest(r.Type, r.WantReply, r.Payload)
		if r.WantReply {
			r.Reply(ok && err == nil, nil)
		}
	}
}

// dialPeer opens an SSH connection to host h's gateway through its API
// listener, as this ptd, for sandbox id and the client's key userKey.
func (s *Server) dialPeer(ctx context.Context, h store.HostRecord, id, userKey string) (*ssh.Client, error) {
	u, err := url.Parse(h.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("host %s registered no usable URL (%q)", h.ID, h.URL)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "https" {
		c = tls.Client(c, &tls.Config{ServerName: u.Hostname()})
	}
	c.SetDeadline(time.Now().Add(30 * time.Second)) // upgrade and handshake
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.JoinPath(RelayPath).String(), nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", relayProto)
	req.Header.Set(HeaderUserKey, userKey)
	br := bufio.NewReader(c)
	if err := req.Write(c); err != nil {
		c.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		c.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		c.Close()
		return nil, fmt.Errorf("relay refused: %s %s", resp.Status, strings.TrimSpace(string(b)))
	}
	conn := &bufConn{Conn: c, r: br}
	cc, chans, reqs, err := ssh.NewClientConn(conn, addr, &ssh.ClientConfig{
		User: id,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(s.relayKey)},
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			if !s.peers.trusted(ctx, key, h.ID) {
				return fmt.Errorf("host key %s is not host %s's relay key", ssh.FingerprintSHA256(key), h.ID)
			}
			return nil
		},
	})
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return ssh.NewClient(cc, chans, reqs), nil
}

// bufConn is a connection whose first bytes were read into r.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }
