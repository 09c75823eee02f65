// Package sshgw is ptd's SSH gateway (docs/terminal.md): `ssh
// SANDBOX_ID@host` logs in with one of that sandbox's ssh_keys and gets a
// shell, an exec, the sftp subsystem (scp, sftp) or a port forward.
// Sessions run through the same terminal path as the PTY WebSocket
// (controlplane.Terminal), so every byte a session reads or writes is
// handled by a process inside the sandbox, never on the host.
package sshgw

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Backend is what the gateway needs from the control plane.
type Backend interface {
	SSHLogin(ctx context.Context, id string, key ssh.PublicKey) (controlplane.Principal, error)
	// AutoResume brings a stopped or archived sandbox to running within
	// timeout, as a preview request does; controlplane.ErrAutoResumeDisabled
	// when its auto_resume is off.
	AutoResume(ctx context.Context, id string, timeout time.Duration) (sandbox.Sandbox, error)
	OpenTerminal(ctx context.Context, p controlplane.Principal, id string, r controlplane.ProcessRequest) (*controlplane.Terminal, error)
	SandboxPortAddr(ctx context.Context, p controlplane.Principal, id string, port int) (string, error)
}

// Server accepts SSH connections.
type Server struct {
	cp  Backend
	log *slog.Logger
	cfg *ssh.ServerConfig
	// relayKey is this ptd's own key on relays between gateways (relay.go);
	// the host key clients see (cfg's) may be one every gateway of a
	// platform shares.
	relayKey ssh.Signer

	// peers, when set, relays logins to sandboxes of other hosts of the
	// store (relay.go).
	peers *peering

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// ResumeTimeout bounds the start of a stopped sandbox by a login. It is
// longer than the preview proxy's: an SSH client waits without a deadline
// of its own, and an archived sandbox is restored from the object store
// first.
const ResumeTimeout = 2 * time.Minute

// SFTPServerArgv is the sftp subsystem's server: pt-agent's own sftp-server
// mode (github.com/pkg/sftp), run in the sandbox as any process is, so
// file operations happen on the sandbox's filesystem as its user.
var SFTPServerArgv = []string{controlplane.AgentPath, "sftp-server"}

// Extension keys carrying the principal from authentication to the
// session.
const (
	extOrg     = "pt-org"
	extProject = "pt-project"
	// extKey is the key the client logged in with (authorized_keys form),
	// which a relay names to the sandbox's host.
	extKey = "pt-key"
)

// New returns a gateway that shows clients hostKey.
func New(cp Backend, hostKey ssh.Signer, log *slog.Logger) *Server {
	s := &Server{cp: cp, log: log, relayKey: hostKey, conns: map[net.Conn]struct{}{}}
	s.cfg = s.serverConfig(hostKey, func(ctx context.Context, meta ssh.ConnMetadata, key ssh.PublicKey) (ssh.PublicKey, error) {
		return key, nil
	})
	return s
}

// errDenied is the one answer to every refused login: the same whether
// the sandbox, the key or the match is wrong.
var errDenied = errors.New("permission denied")

// serverConfig is the gateway's config with host key hostKey and a
// public-key check: login says which key the sandbox's ssh_keys must hold
// for the key presented (itself on a client's connection; the key the
// relaying ptd names on a relayed one), or refuses.
func (s *Server) serverConfig(hostKey ssh.Signer, login func(ctx context.Context, meta ssh.ConnMetadata, key ssh.PublicKey) (ssh.PublicKey, error)) *ssh.ServerConfig {
	cfg := &ssh.ServerConfig{
		// Only public keys: no password or keyboard-interactive method is
		// offered at all.
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			user, err := login(ctx, meta, key)
			if err != nil {
				return nil, errDenied
			}
			p, err := s.cp.SSHLogin(ctx, meta.User(), user)
			if err != nil {
				return nil, errDenied
			}
			return &ssh.Permissions{Extensions: map[string]string{extOrg: p.OrgID, extProject: p.ProjectID,
				extKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(user)))}}, nil
		},
		ServerVersion: "SSH-2.0-Platinum",
	}
	cfg.AddHostKey(hostKey)
	return cfg
}

// LoadOrCreateHostKey reads the ed25519 host key at path, creating it
// (0600) on first use so clients see the same host key across restarts.
func LoadOrCreateHostKey(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		_, priv, gerr := ed25519.GenerateKey(rand.Reader)
		if gerr != nil {
			return nil, gerr
		}
		blk, merr := ssh.MarshalPrivateKey(priv, "platinum ssh gateway")
		if merr != nil {
			return nil, merr
		}
		b = pem.EncodeToMemory(blk)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return nil, err
		}
		if err := os.Rename(tmp, path); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("ssh host key %s: %w", path, err)
	}
	return signer, nil
}

// Serve accepts connections on ln until ctx ends, then closes them all.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.peers != nil {
		s.peers.advertise(ctx, s.relayKey.PublicKey())
	}
	go func() {
		<-ctx.Done()
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		go s.track(c, func() { s.serveConn(ctx, c, s.cfg, false) })
	}
}

// track serves c while counting it among the connections Serve closes
// when it ends.
func (s *Server) track(c net.Conn, serve func()) {
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	serve()
}

// serveConn serves one SSH connection: a client's, or one another ptd
// relays (relayed), which is served here or not at all.
func (s *Server) serveConn(ctx context.Context, c net.Conn, cfg *ssh.ServerConfig, relayed bool) {
	c.SetDeadline(time.Now().Add(30 * time.Second)) // the handshake only
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		s.log.Debug("ssh handshake", "remote", c.RemoteAddr().String(), "relayed", relayed, "err", err)
		return
	}
	c.SetDeadline(time.Time{})
	defer sc.Close()
	id := sc.User()
	p := controlplane.Principal{OrgID: sc.Permissions.Extensions[extOrg], ProjectID: sc.Permissions.Extensions[extProject]}
	if s.peers != nil {
		if h, ok := s.peers.router.Peer(ctx, id); ok {
			if relayed {
				// One hop: never drive a sandbox another live host runs.
				go ssh.DiscardRequests(reqs)
				for nc := range chans {
					go refuse(nc, "the sandbox is on host "+h.ID+" now; connect again")
				}
				return
			}
			s.log.Info("ssh login relayed", "sandbox", id, "host", h.ID, "remote", c.RemoteAddr().String())
			s.relay(ctx, sc, chans, reqs, h)
			return
		}
	}
	s.log.Info("ssh login", "sandbox", id, "remote", c.RemoteAddr().String(), "relayed", relayed)
	go ssh.DiscardRequests(reqs)
	// A login to a stopped sandbox starts it (when its auto_resume is on),
	// as preview traffic does; channels wait for that.
	res := &resumption{done: make(chan struct{})}
	go func() {
		defer close(res.done)
		_, res.err = s.cp.AutoResume(ctx, id, ResumeTimeout)
		if res.err != nil {
			s.log.Info("ssh login: sandbox not resumed", "sandbox", id, "err", res.err)
		}
	}()
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			ch, creqs, err := nc.Accept()
			if err != nil {
				continue
			}
			go s.session(ctx, p, id, res, ch, creqs)
		case "direct-tcpip":
			go s.forward(ctx, p, id, res, nc)
		default:
			nc.Reject(ssh.UnknownChannelType, "only session and direct-tcpip channels")
		}
	}
}

// resumption is the auto-resume a login started; done closes when it
// ended, with err set when the sandbox was not brought to running.
type resumption struct {
	done chan struct{}
	err  error
}

// wait returns what the resume ended with, or ctx's error.
func (r *resumption) wait(ctx context.Context) error {
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// resumeMessage says why a session cannot run in a sandbox that was not
// resumed, or "" to let the terminal's own error speak.
func resumeMessage(err error) string {
	var se *controlplane.StateError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, controlplane.ErrAutoResumeDisabled):
		return "the sandbox is stopped and its auto_resume is off: start it first (POST /v1/sandboxes/{id}/start)"
	case errors.As(err, &se):
		return fmt.Sprintf("the sandbox is %s and cannot be started by a login", se.State)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("the sandbox did not start within %s", ResumeTimeout)
	}
	return "the sandbox could not be started: " + err.Error()
}

// session serves one session channel: env and pty-req first, then one
// shell, exec or sftp subsystem; window-change while it runs.
func (s *Server) session(ctx context.Context, p controlplane.Principal, id string, res *resumption, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	env := map[string]string{}
	var size *controlplane.PTYSize
	for req := range reqs {
		switch req.Type {
		case "env":
			var kv struct{ Name, Value string }
			if ssh.Unmarshal(req.Payload, &kv) == nil {
				env[kv.Name] = kv.Value
			}
			req.Reply(true, nil)
		case "pty-req":
			var pr struct {
				Term          string
				Cols, Rows    uint32
				Width, Height uint32
				Modes         string
			}
			if err := ssh.Unmarshal(req.Payload, &pr); err != nil {
				req.Reply(false, nil)
				continue
			}
			size = &controlplane.PTYSize{Cols: clampSide(pr.Cols, 80), Rows: clampSide(pr.Rows, 24)}
			if pr.Term != "" {
				env["TERM"] = pr.Term
			}
			req.Reply(true, nil)
		case "shell", "exec", "subsystem":
			r := controlplane.ProcessRequest{Env: env, PTY: size}
			switch req.Type {
			case "exec":
				var ex struct{ Command string }
				if err := ssh.Unmarshal(req.Payload, &ex); err != nil {
					req.Reply(false, nil)
					continue
				}
				r.Argv = []string{"/bin/sh", "-c", ex.Command}
			case "subsystem":
				var sub struct{ Name string }
				if err := ssh.Unmarshal(req.Payload, &sub); err != nil || sub.Name != "sftp" {
					req.Reply(false, nil) // the only subsystem there is
					continue
				}
				// The sftp protocol runs on pipes, whatever the client asked.
				r.Argv, r.PTY, size = SFTPServerArgv, nil, nil
			}
			if len(r.Env) == 0 {
				r.Env = nil
			}
			fail := func(msg string) {
				fmt.Fprintf(ch.Stderr(), "platinum: %s\r\n", msg)
				exitStatus(ch, 255)
			}
			if msg := resumeMessage(res.wait(ctx)); msg != "" {
				req.Reply(true, nil)
				fail(msg)
				return
			}
			term, err := s.cp.OpenTerminal(ctx, p, id, r)
			if err != nil {
				req.Reply(true, nil)
				fail(err.Error())
				return
			}
			req.Reply(true, nil)
			s.run(term, ch, reqs, size != nil)
			return
		default:
			// x11 and agent forwarding: not offered.
			req.Reply(false, nil)
		}
	}
}

// run pumps one terminal until its process ends (exit-status follows) or
// the client goes away (the process is hung up).
func (s *Server) run(term *controlplane.Terminal, ch ssh.Channel, reqs <-chan *ssh.Request, pty bool) {
	defer term.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for req := range reqs {
			ok := false
			if req.Type == "window-change" {
				var wc struct{ Cols, Rows, Width, Height uint32 }
				if ssh.Unmarshal(req.Payload, &wc) == nil {
					ok = term.Resize(ctx, controlplane.PTYSize{Cols: clampSide(wc.Cols, 80), Rows: clampSide(wc.Rows, 24)}) == nil
				}
			}
			if req.WantReply {
				req.Reply(ok, nil)
			}
		}
	}()
	inputDone := make(chan struct{})
	go func() {
		defer close(inputDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := ch.Read(buf)
			if n > 0 {
				if ierr := term.Input(ctx, buf[:n], false); ierr != nil {
					// Dropped, as a network would drop it (an input that
					// raced a snapshot's connection reset, or reached a
					// process that just ended); the session goes on, and
					// its output side says when it ends.
					s.log.Debug("ssh input", "pid", term.Pid, "err", ierr)
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) && !pty {
					term.Input(ctx, nil, true) // the client closed stdin
				}
				return
			}
		}
	}()
	for {
		ev, err := term.Next()
		if err != nil {
			// The sandbox stopped under the session (its shell is hung up
			// at the next start), or the agent broke: say so, as a
			// dropped connection would.
			var se *controlplane.StateError
			if errors.As(err, &se) {
				fmt.Fprintf(ch.Stderr(), "\r\nplatinum: the sandbox is %s; the session ended\r\n", se.State)
			} else {
				fmt.Fprintf(ch.Stderr(), "\r\nplatinum: the session's connection to the sandbox broke: %v\r\n", err)
			}
			term.Hangup()
			exitStatus(ch, 255)
			return
		}
		switch {
		case ev.End != nil:
			code := ev.End.Code
			if code < 0 || code > 255 {
				code = 255
			}
			ch.CloseWrite()
			exitStatus(ch, code)
			return
		case len(ev.PTY) > 0:
			err = writeAll(ch, ev.PTY)
		case len(ev.Stdout) > 0:
			err = writeAll(ch, ev.Stdout)
		case len(ev.Stderr) > 0:
			err = writeAll(ch.Stderr(), ev.Stderr)
		}
		if err != nil {
			term.Hangup() // the client went away
			return
		}
	}
}

func writeAll(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	return err
}

func exitStatus(ch ssh.Channel, code int) {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, uint32(code))
	ch.SendRequest("exit-status", false, b)
}

// clampSide keeps a terminal side within what the processes API takes.
func clampSide(v, def uint32) uint32 {
	switch {
	case v == 0:
		return def
	case v > controlplane.MaxPTYSide:
		return controlplane.MaxPTYSide
	}
	return v
}

// forward serves a direct-tcpip channel (ssh -L): a connection to a port
// of the sandbox. The requested host is ignored: only the sandbox's own
// ports are reachable, on its network interface.
func (s *Server) forward(ctx context.Context, p controlplane.Principal, id string, res *resumption, nc ssh.NewChannel) {
	var dt struct {
		Host       string
		Port       uint32
		OriginHost string
		OriginPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &dt); err != nil {
		nc.Reject(ssh.ConnectionFailed, "bad direct-tcpip request")
		return
	}
	if msg := resumeMessage(res.wait(ctx)); msg != "" {
		nc.Reject(ssh.Prohibited, msg)
		return
	}
	addr, err := s.cp.SandboxPortAddr(ctx, p, id, int(dt.Port))
	if err != nil {
		nc.Reject(ssh.Prohibited, err.Error())
		return
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	up, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		nc.Reject(ssh.ConnectionFailed, "port "+strconv.Itoa(int(dt.Port))+" of the sandbox refused the connection")
		return
	}
	defer up.Close()
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	go ssh.DiscardRequests(reqs)
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, ch); up.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(ch, up); ch.CloseWrite(); done <- struct{}{} }()
	<-done
	<-done
}
