package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/platinum-dev/platinum/internal/controlplane"
)

// The PTY WebSocket (GET /v1/sandboxes/{id}/pty, docs/terminal.md):
// binary frames are terminal bytes both ways, text frames are JSON
// control messages from the client, and the close frame carries the
// process's exit ("exit N", code 1000) or an error (4000 + its HTTP
// status, reason = message).

// PTYSubprotocol is the WebSocket subprotocol the server prefers; a
// client that offers it next to bearer.<token> gets it echoed instead of
// the token.
const PTYSubprotocol = "platinum.pty.v1"

// bearerProtoPrefix marks the subprotocol that carries the API token for
// clients (browsers) that cannot set an Authorization header.
const bearerProtoPrefix = "bearer."

// ptyStartWait is how long the server waits for a start message before
// it runs the login shell.
const ptyStartWait = time.Second

// ptyMsg is a PtyControlMessage.
type ptyMsg struct {
	Type string            `json:"type"`
	Cmd  json.RawMessage   `json:"cmd"`
	Cwd  string            `json:"cwd"`
	Env  map[string]string `json:"env"`
	User string            `json:"user"`
	Cols *int64            `json:"cols"`
	Rows *int64            `json:"rows"`
}

// wsMsg is one frame read from the client.
type wsMsg struct {
	typ  websocket.MessageType
	data []byte
}

// ptyCloseError is an error that ends the WebSocket with a 4xxx code.
func (a *API) ptyCloseError(conn *websocket.Conn, err error) {
	status, body := a.errorBody(err)
	msg, _ := body["error"].(string)
	if msg == "" {
		msg = err.Error()
	}
	if status >= 500 {
		a.log.Error("pty failed", "err", err)
	}
	conn.Close(websocket.StatusCode(4000+status), truncReason(msg))
}

// truncReason fits a close reason into the 123 bytes a close frame holds.
func truncReason(s string) string {
	for len(s) > 123 {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

// bearerFromProtocols returns the token of a bearer.<token> subprotocol.
func bearerFromProtocols(r *http.Request) (proto, token string) {
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			p = strings.TrimSpace(p)
			if tok, ok := strings.CutPrefix(p, bearerProtoPrefix); ok && tok != "" {
				return p, tok
			}
		}
	}
	return "", ""
}

// ptyAuth lets the token arrive as a subprotocol when no Authorization
// header is set, then authenticates as every /v1 route does.
func (a *API) ptyAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			if _, tok := bearerFromProtocols(r); tok != "" {
				r.Header.Set("Authorization", "Bearer "+tok)
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (a *API) pty(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	id := r.PathValue("id")
	// Errors before the upgrade are ordinary JSON answers (404 for another
	// org's sandbox, 409 when it is not running).
	if err := a.cp.RequireRunning(r.Context(), p, id); err != nil {
		return err
	}
	protos := []string{PTYSubprotocol}
	if bp, _ := bearerFromProtocols(r); bp != "" {
		protos = append(protos, bp)
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols: protos,
		// The token, not a cookie, authenticates, so a page of another
		// origin gains nothing it could not do with the token itself.
		InsecureSkipVerify: true,
	})
	if err != nil {
		return nil // Accept has answered
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)

	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	msgs := make(chan wsMsg, 16)
	readErr := make(chan error, 1)
	go func() {
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				readErr <- err
				close(msgs)
				return
			}
			select {
			case msgs <- wsMsg{typ, data}:
			case <-ctx.Done():
				return
			}
		}
	}()

	req := controlplane.ProcessRequest{}
	size := controlplane.DefaultPTY
	req.PTY = &size
	var pending *wsMsg
	select {
	case m, ok := <-msgs:
		if !ok {
			return nil // the client left before anything started
		}
		start, err := parsePTYMsg(m)
		if err != nil {
			a.ptyCloseError(conn, err)
			return nil
		}
		if start != nil && start.Type == "start" {
			if req, err = startRequest(*start); err != nil {
				a.ptyCloseError(conn, err)
				return nil
			}
		} else {
			pending = &m
		}
	case <-time.After(ptyStartWait):
	}

	term, err := a.cp.OpenTerminal(ctx, p, id, req)
	if err != nil {
		a.ptyCloseError(conn, err)
		return nil
	}
	defer term.Close()

	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := term.Next()
			if err != nil {
				if ctx.Err() == nil {
					a.ptyCloseError(conn, err)
				}
				return
			}
			switch {
			case ev.End != nil:
				conn.Close(websocket.StatusNormalClosure, fmt.Sprintf("exit %d", ev.End.Code))
				return
			case len(ev.PTY) > 0:
				err = conn.Write(ctx, websocket.MessageBinary, ev.PTY)
			case len(ev.Stdout) > 0:
				err = conn.Write(ctx, websocket.MessageBinary, ev.Stdout)
			case len(ev.Stderr) > 0:
				err = conn.Write(ctx, websocket.MessageBinary, ev.Stderr)
			}
			if err != nil {
				return
			}
		}
	}()

	handle := func(m wsMsg) error {
		if m.typ == websocket.MessageBinary {
			return term.Input(ctx, m.data, false)
		}
		c, err := parsePTYMsg(m)
		if err != nil {
			return err
		}
		switch c.Type {
		case "resize":
			sz, err := ptyBody{Cols: c.Cols, Rows: c.Rows}.size("")
			if err != nil {
				return err
			}
			return term.Resize(ctx, sz)
		case "start":
			return badRequest("start must be the first message", "type")
		}
		return badRequest(`type must be "start" or "resize"`, "type")
	}
	if pending != nil {
		if err := handle(*pending); err != nil {
			a.ptyCloseError(conn, err)
			term.Hangup()
			return nil
		}
	}
	for {
		select {
		case <-done:
			return nil
		case m, ok := <-msgs:
			if !ok {
				// The client went away while the process runs: hang up.
				term.Hangup()
				return nil
			}
			if err := handle(m); err != nil {
				var ae *apiError
				if errors.As(err, &ae) {
					a.ptyCloseError(conn, err)
					term.Hangup()
					return nil
				}
				// Input to a process that just ended: its end event follows.
				a.log.Debug("pty input", "sandbox", id, "err", err)
			}
		}
	}
}

// parsePTYMsg decodes a text frame; binary frames give nil.
func parsePTYMsg(m wsMsg) (*ptyMsg, error) {
	if m.typ != websocket.MessageText {
		return nil, nil
	}
	var c ptyMsg
	dec := json.NewDecoder(strings.NewReader(string(m.data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, badRequest("control message must be a JSON object with a known type: "+err.Error(), "type")
	}
	return &c, nil
}

// startRequest converts a start message.
func startRequest(c ptyMsg) (controlplane.ProcessRequest, error) {
	req := controlplane.ProcessRequest{Env: c.Env, Cwd: c.Cwd, User: c.User}
	if len(c.Cmd) > 0 && string(c.Cmd) != "null" {
		argv, err := execBody{Cmd: c.Cmd}.argv()
		if err != nil {
			return req, err
		}
		req.Argv = argv
	}
	size := controlplane.DefaultPTY
	if c.Cols != nil || c.Rows != nil {
		b := ptyBody{Cols: c.Cols, Rows: c.Rows}
		if b.Cols == nil {
			v := int64(size.Cols)
			b.Cols = &v
		}
		if b.Rows == nil {
			v := int64(size.Rows)
			b.Rows = &v
		}
		var err error
		if size, err = b.size(""); err != nil {
			return req, err
		}
	}
	req.PTY = &size
	return req, nil
}
