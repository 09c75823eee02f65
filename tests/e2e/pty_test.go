package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// ptyConn is an open PTY WebSocket with everything read so far.
type ptyConn struct {
	t    *testing.T
	ctx  context.Context
	conn *websocket.Conn
	out  strings.Builder
}

func wsURL(id string) string {
	return "ws" + strings.TrimPrefix(env.url, "http") + "/v1/sandboxes/" + id + "/pty"
}

// dialPTY opens the PTY WebSocket with opts; the test's cleanup closes it.
func dialPTY(t *testing.T, id string, opts *websocket.DialOptions) (*ptyConn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	conn, resp, err := websocket.Dial(ctx, wsURL(id), opts)
	if err != nil {
		return nil, resp, err
	}
	t.Cleanup(func() { conn.CloseNow() })
	return &ptyConn{t: t, ctx: ctx, conn: conn}, resp, nil
}

// dialBearer is dialPTY with the token in an Authorization header; a
// failed dial fails the test.
func dialBearer(t *testing.T, id string) *ptyConn {
	t.Helper()
	p, _, err := dialPTY(t, id, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + env.token}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *ptyConn) send(s string) {
	p.t.Helper()
	if err := p.conn.Write(p.ctx, websocket.MessageBinary, []byte(s)); err != nil {
		p.t.Fatalf("send %q: %v", s, err)
	}
}

func (p *ptyConn) control(v any) {
	p.t.Helper()
	b, _ := json.Marshal(v)
	if err := p.conn.Write(p.ctx, websocket.MessageText, b); err != nil {
		p.t.Fatalf("control %s: %v", b, err)
	}
}

// until reads until the output holds want (or the server closes).
func (p *ptyConn) until(want string) {
	p.t.Helper()
	for !strings.Contains(p.out.String(), want) {
		typ, data, err := p.conn.Read(p.ctx)
		if err != nil {
			p.t.Fatalf("waiting for %q: %v; output so far %q", want, err, p.out.String())
		}
		if typ != websocket.MessageBinary {
			p.t.Fatalf("server sent a %v frame: %q", typ, data)
		}
		p.out.Write(data)
	}
}

// closeStatus reads to the end and returns the close frame.
func (p *ptyConn) closeStatus() websocket.CloseError {
	p.t.Helper()
	for {
		_, data, err := p.conn.Read(p.ctx)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				p.t.Fatalf("read ended without a close frame: %v; output %q", err, p.out.String())
			}
			return ce
		}
		p.out.Write(data)
	}
}

// TestPTYWebSocket drives the PTY WebSocket on both runtime classes.
func TestPTYWebSocket(t *testing.T) {
	c := newClient(t)
	for _, rt := range []string{"runc", "gvisor"} {
		t.Run(rt, func(t *testing.T) {
			testPTY(t, c, c.create(map[string]any{"template": "busybox", "runtime": rt}))
		})
	}
}

func testPTY(t *testing.T, c *client, id string) {
	bearer := http.Header{"Authorization": {"Bearer " + env.token}}

	t.Run("shell", func(t *testing.T) {
		p := dialBearer(t, id)
		p.control(map[string]any{"type": "start"}) // the login shell, 80x24
		p.send("stty size\n")
		p.until("24 80")
		p.send("echo hi\n")
		p.until("echo hi\r\nhi\r\n")
		p.control(map[string]any{"type": "resize", "cols": 123, "rows": 45})
		p.send("stty size\n")
		p.until("45 123")
		p.send("exit 3\n")
		ce := p.closeStatus()
		if ce.Code != websocket.StatusNormalClosure || ce.Reason != "exit 3" {
			t.Fatalf("close %d %q, want 1000 \"exit 3\"", ce.Code, ce.Reason)
		}
	})

	t.Run("start command and bearer subprotocol", func(t *testing.T) {
		p, resp, err := dialPTY(t, id, &websocket.DialOptions{Subprotocols: []string{"platinum.pty.v1", "bearer." + env.token}})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != "platinum.pty.v1" {
			t.Errorf("subprotocol %q, want platinum.pty.v1 (never the token echoed when avoidable)", got)
		}
		p.control(map[string]any{"type": "start", "cmd": []string{"sh", "-c", `echo "$FOO $TERM $(pwd) $(stty size)"; exit 7`},
			"cwd": "/tmp", "env": map[string]string{"FOO": "bar"}, "cols": 90, "rows": 20})
		ce := p.closeStatus()
		if !strings.Contains(p.out.String(), "bar xterm-256color /tmp 20 90") {
			t.Errorf("output %q", p.out.String())
		}
		if ce.Code != websocket.StatusNormalClosure || ce.Reason != "exit 7" {
			t.Fatalf("close %d %q, want 1000 \"exit 7\"", ce.Code, ce.Reason)
		}
	})

	t.Run("bearer subprotocol alone is echoed", func(t *testing.T) {
		p, resp, err := dialPTY(t, id, &websocket.DialOptions{Subprotocols: []string{"bearer." + env.token}})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != "bearer."+env.token {
			t.Errorf("subprotocol %q", got)
		}
		p.control(map[string]any{"type": "start", "cmd": "exit 0"})
		if ce := p.closeStatus(); ce.Reason != "exit 0" {
			t.Fatalf("close %d %q", ce.Code, ce.Reason)
		}
	})

	t.Run("keystrokes first start the login shell", func(t *testing.T) {
		p := dialBearer(t, id)
		p.send("echo zz$((40+2))\n")
		p.until("zz42")
		p.send("exit\n")
		if ce := p.closeStatus(); ce.Reason != "exit 0" {
			t.Fatalf("close %d %q", ce.Code, ce.Reason)
		}
	})

	t.Run("a client that goes away hangs the process up", func(t *testing.T) {
		p := dialBearer(t, id)
		p.control(map[string]any{"type": "start", "cmd": "echo started; exec sleep 6001"})
		p.until("started")
		running := func() bool {
			r := c.do("GET", "/v1/sandboxes/"+id+"/processes", nil)
			return strings.Contains(string(r.Body), "sleep 6001")
		}
		if !running() {
			t.Fatal("the terminal's process is not listed")
		}
		p.conn.CloseNow()
		deadline := time.Now().Add(30 * time.Second)
		for running() {
			if time.Now().After(deadline) {
				t.Fatal("the process outlived its terminal's client")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("bad control message closes 4400", func(t *testing.T) {
		p := dialBearer(t, id)
		p.control(map[string]any{"type": "start", "cols": 0})
		if ce := p.closeStatus(); ce.Code != 4400 || !strings.Contains(ce.Reason, "cols") {
			t.Fatalf("close %d %q, want 4400 naming cols", ce.Code, ce.Reason)
		}
	})

	t.Run("start as another user", func(t *testing.T) {
		p := dialBearer(t, id)
		p.control(map[string]any{"type": "start", "user": "user", "cmd": `echo "$(id -un) $(id -u) $HOME $(pwd)"; touch mine; stat -c %U mine`})
		ce := p.closeStatus()
		if !strings.Contains(p.out.String(), "user 1000 /home/user /home/user\r\nuser\r\n") || ce.Reason != "exit 0" {
			t.Fatalf("output %q, close %d %q", p.out.String(), ce.Code, ce.Reason)
		}
		p = dialBearer(t, id)
		p.control(map[string]any{"type": "start", "user": "root", "cmd": "id -u; exit 0"})
		if ce := p.closeStatus(); !strings.Contains(p.out.String(), "0\r\n") || ce.Reason != "exit 0" {
			t.Fatalf("as root: output %q, close %d %q", p.out.String(), ce.Code, ce.Reason)
		}
	})

	t.Run("an unknown user closes 4400 naming it", func(t *testing.T) {
		for _, user := range []string{"nosuchuser", "Not A User!"} {
			p := dialBearer(t, id)
			p.control(map[string]any{"type": "start", "user": user, "cmd": "echo ran"})
			ce := p.closeStatus()
			if ce.Code != 4400 || !strings.Contains(ce.Reason, "user") || !strings.Contains(ce.Reason, user) || strings.Contains(p.out.String(), "ran") {
				t.Errorf("user %q: close %d %q, output %q; want 4400 naming the user and nothing run", user, ce.Code, ce.Reason, p.out.String())
			}
		}
	})

	t.Run("access", func(t *testing.T) {
		_, oc := createOrg(t, c, "pty-other-"+randHex(3))
		other := oc.token
		for name, opts := range map[string]*websocket.DialOptions{
			"no token":              {},
			"other org header":      {HTTPHeader: http.Header{"Authorization": {"Bearer " + other}}},
			"other org subprotocol": {Subprotocols: []string{"bearer." + other}},
			"bad token":             {Subprotocols: []string{"bearer.pt_nope"}},
		} {
			_, resp, err := dialPTY(t, id, opts)
			want := 404
			if name == "no token" || name == "bad token" {
				want = 401
			}
			if err == nil || resp == nil || resp.StatusCode != want {
				t.Errorf("%s: err %v, response %v, want %d", name, err, resp, want)
			}
		}
		_, resp, err := dialPTY(t, "sb_nope", &websocket.DialOptions{HTTPHeader: bearer})
		if err == nil || resp == nil || resp.StatusCode != 404 {
			t.Errorf("unknown sandbox: err %v, response %v", err, resp)
		}
	})
}
