package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/api/gen/process"
)

// ptySession is one terminal of the toolbox: a login shell on a PTY,
// reachable over WebSocket until it exits or is killed.
type ptySession struct {
	id        string
	cwd       string
	envs      map[string]string
	p         *proc
	createdAt time.Time
	mu        sync.Mutex
	cols      uint32
	rows      uint32
	attached  bool
}

func (ps *ptySession) view() map[string]any {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	envs := ps.envs
	if envs == nil {
		envs = map[string]string{}
	}
	return map[string]any{"id": ps.id, "cwd": ps.cwd, "envs": envs, "cols": ps.cols, "rows": ps.rows,
		"createdAt": ps.createdAt.UTC().Format(time.RFC3339Nano), "active": ps.p.running(), "lazyStart": false}
}

// The PTY WebSocket's subprotocols (the SDK offers them; the server echoes
// the exit-control one).
const (
	ptyExitControl = "X-Daytona-Pty-Exit-Control"
	ptyEnvsPrefix  = "X-Daytona-Pty-Envs~"
)

type ptyCreate struct {
	ID   string            `json:"id"`
	Cwd  string            `json:"cwd"`
	Envs map[string]string `json:"envs"`
	Cols uint32            `json:"cols"`
	Rows uint32            `json:"rows"`
}

// startPTY starts the shell of a new PTY session.
func (tb *toolbox) startPTY(req ptyCreate) (*ptySession, error) {
	if !sessionIDRE.MatchString(req.ID) {
		return nil, tbErr(http.StatusBadRequest, "BAD_REQUEST", "id must be 1-128 letters, digits, '.', '_' or '-'")
	}
	if err := validEnvKeys(req.Envs); err != nil {
		return nil, err
	}
	if req.Cols == 0 {
		req.Cols = 80
	}
	if req.Rows == 0 {
		req.Rows = 24
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if old, ok := tb.ptys[req.ID]; ok {
		if old.p.running() {
			return nil, tbErr(http.StatusConflict, "CONFLICT", "PTY session %s already exists", req.ID)
		}
		delete(tb.ptys, req.ID)
	}
	s := tb.s
	acct, err := s.lookupAccount("")
	if err != nil {
		return nil, err
	}
	var cwdp *string
	if req.Cwd != "" {
		cwdp = &req.Cwd
	}
	dir, err := s.workdir(acct, cwdp)
	if err != nil {
		return nil, err
	}
	envs := mapWith(req.Envs, "TERM", "xterm-256color")
	if t, ok := req.Envs["TERM"]; ok {
		envs["TERM"] = t
	}
	env := buildEnv(acct, s.sandboxEnv(), envs)
	shell := "/bin/sh"
	if _, err := os.Stat("/bin/bash"); err == nil {
		shell = "/bin/bash"
	}
	size := &process.PTY_Size{Cols: req.Cols, Rows: req.Rows}
	p, sub, err := s.start(spawnSpec{path: shell, argv: []string{shell, "-i"}, env: env, dir: dir, acct: acct, pty: &process.PTY{Size: size}})
	if err != nil {
		return nil, err
	}
	p.unsubscribe(sub) // output goes to the connected WebSocket
	ps := &ptySession{id: req.ID, cwd: dir, envs: req.Envs, p: p, createdAt: time.Now(), cols: req.Cols, rows: req.Rows}
	tb.ptys[req.ID] = ps
	return ps, nil
}

func (tb *toolbox) pty(id string) (*ptySession, error) {
	return lookup(tb, tb.ptys, id, "PROCESS_NOT_FOUND", "PTY session")
}

func (tb *toolbox) listPTY(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{"sessions": views(tb, tb.ptys)})
	return nil
}

func (tb *toolbox) createPTY(w http.ResponseWriter, r *http.Request) error {
	var req ptyCreate
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	ps, err := tb.startPTY(req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]string{"sessionId": ps.id})
	return nil
}

func (tb *toolbox) getPTY(w http.ResponseWriter, r *http.Request) error {
	return writeView(w, r.PathValue("id"), tb.pty)
}

func (tb *toolbox) killPTY(w http.ResponseWriter, r *http.Request) error {
	ps, err := tb.pty(r.PathValue("id"))
	if err != nil {
		return err
	}
	_ = ps.p.signal(unix.SIGKILL)
	tb.mu.Lock()
	delete(tb.ptys, ps.id)
	tb.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"message": "PTY session " + ps.id + " killed"})
	return nil
}

func (tb *toolbox) resizePTY(w http.ResponseWriter, r *http.Request) error {
	ps, err := tb.pty(r.PathValue("id"))
	if err != nil {
		return err
	}
	var req struct {
		Cols uint32 `json:"cols"`
		Rows uint32 `json:"rows"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.Cols == 0 || req.Rows == 0 || req.Cols > 1000 || req.Rows > 1000 {
		return tbErr(http.StatusBadRequest, "BAD_REQUEST", "cols and rows must be between 1 and 1000")
	}
	if err := ps.p.resize(&process.PTY_Size{Cols: req.Cols, Rows: req.Rows}); err != nil {
		return err
	}
	ps.mu.Lock()
	ps.cols, ps.rows = req.Cols, req.Rows
	ps.mu.Unlock()
	writeJSON(w, http.StatusOK, ps.view())
	return nil
}

// createConnectPTY is the SDK's one-round-trip create: query id, cols,
// rows, cwd; envs in the X-Daytona-Pty-Envs~<base64url JSON> subprotocol.
func (tb *toolbox) createConnectPTY(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	req := ptyCreate{ID: q.Get("id"), Cwd: q.Get("cwd")}
	for _, f := range []struct {
		name string
		dst  *uint32
	}{{"cols", &req.Cols}, {"rows", &req.Rows}} {
		if v := q.Get(f.name); v != "" {
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil || n == 0 {
				return tbErr(http.StatusBadRequest, "BAD_REQUEST", "%s must be a positive integer", f.name)
			}
			*f.dst = uint32(n)
		}
	}
	for _, proto := range websocketProtocols(r) {
		if enc, ok := strings.CutPrefix(proto, ptyEnvsPrefix); ok {
			raw, err := base64.RawURLEncoding.DecodeString(enc)
			if err != nil || json.Unmarshal(raw, &req.Envs) != nil {
				return tbErr(http.StatusBadRequest, "BAD_REQUEST", "PTY envs subprotocol is not base64url JSON")
			}
		}
	}
	ps, err := tb.startPTY(req)
	if err != nil {
		return err
	}
	tb.attach(w, r, ps)
	return nil
}

func (tb *toolbox) connectPTY(w http.ResponseWriter, r *http.Request) error {
	ps, err := tb.pty(r.PathValue("id"))
	if err != nil {
		return err
	}
	tb.attach(w, r, ps)
	return nil
}

func websocketProtocols(r *http.Request) []string {
	var out []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

type ptyControl struct {
	Type       string `json:"type"`
	Status     string `json:"status"`
	ExitCode   *int   `json:"exitCode,omitempty"`
	ExitReason string `json:"exitReason,omitempty"`
	Error      string `json:"error,omitempty"`
}

// attach joins a WebSocket to a PTY: the "connected" control message
// first, then terminal output as binary frames and input from the client's
// frames; when the shell exits, the "exited" control message and a normal
// close. One client at a time.
func (tb *toolbox) attach(w http.ResponseWriter, r *http.Request, ps *ptySession) {
	var protos []string
	for _, p := range websocketProtocols(r) {
		if p == ptyExitControl {
			protos = []string{ptyExitControl}
		}
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: protos, InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer conn.CloseNow()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ps.mu.Lock()
	busy := ps.attached
	ps.attached = !busy
	ps.mu.Unlock()
	if busy {
		b, _ := json.Marshal(ptyControl{Type: "control", Status: "error", Error: "PTY session " + ps.id + " already has a client"})
		_ = conn.Write(ctx, websocket.MessageText, b)
		conn.Close(websocket.StatusPolicyViolation, "busy")
		return
	}
	defer func() { ps.mu.Lock(); ps.attached = false; ps.mu.Unlock() }()
	sub := ps.p.subscribe()
	defer ps.p.unsubscribe(sub)
	hello, _ := json.Marshal(ptyControl{Type: "control", Status: "connected"})
	if err := conn.Write(ctx, websocket.MessageText, hello); err != nil {
		return
	}
	go func() {
		defer cancel()
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if err := ps.p.write(&process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: data}}); err != nil {
				return
			}
		}
	}()
	for {
		select {
		case ev := <-sub.ch:
			if d := ev.GetData(); d != nil {
				if err := conn.Write(ctx, websocket.MessageBinary, d.GetPty()); err != nil {
					return
				}
			}
			if end := ev.GetEnd(); end != nil {
				code := int(end.GetExitCode())
				msg := ptyControl{Type: "control", Status: "exited", ExitCode: &code}
				if !end.GetExited() {
					msg.ExitReason = end.GetStatus()
				}
				b, _ := json.Marshal(msg)
				_ = conn.Write(ctx, websocket.MessageText, b)
				conn.Close(websocket.StatusNormalClosure, "")
				tb.mu.Lock()
				if tb.ptys[ps.id] == ps {
					delete(tb.ptys, ps.id)
				}
				tb.mu.Unlock()
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
