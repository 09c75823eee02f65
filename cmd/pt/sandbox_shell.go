package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/term"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxShell is `pt sandbox shell ID [-- CMD...]` (docs/terminal.md): an
// interactive terminal over the PTY WebSocket when stdin is a terminal;
// otherwise, as `ssh -T` does, the command runs without a terminal on
// pipes fed from stdin. Either way pt exits with the command's code.
type sandboxShell struct{ app *app }

const sandboxShellSynopsis = "pt sandbox shell ID [--cwd DIR] [--env K=V]... [-- CMD [ARGS...]]"

// shellLogin is the command of a shell without a terminal when none is
// given; with one, the server's default login shell runs.
const shellLogin = `if [ -x /bin/bash ]; then exec /bin/bash -l; fi; exec /bin/sh -l`

// bind binds the flags; the returned run opens the shell.
func (c *sandboxShell) bind(fs *flag.FlagSet) runFunc {
	var cwd string
	env := kvFlag{}
	fs.Var(env, "env", "environment variable `K=V` for the shell (repeatable)")
	fs.StringVar(&cwd, "cwd", "", "working `DIR`ectory")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) == 0 {
			return in.usageErr("want a sandbox ID")
		}
		id, cmd := pos[0], pos[1:]
		if f, ok := c.app.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return c.interactive(ctx, f, id, cmd, cwd, env.orNil())
		}
		return c.piped(ctx, id, cmd, cwd, env.orNil())
	}
}

// exitWith turns a remote exit code into pt's.
func exitWith(code int) error {
	switch {
	case code == 0:
		return nil
	case code < 0:
		return &exitError{code: exitSignaled, msg: "the shell was killed by a signal"}
	}
	return &exitError{code: min(code, 255)}
}

// piped runs the command on pipes: stdin is copied to it as it arrives,
// its stdout and stderr come back apart.
func (c *sandboxShell) piped(ctx context.Context, id string, cmd []string, cwd string, env map[string]string) error {
	cl, err := c.app.client()
	if err != nil {
		return err
	}
	sb, err := cl.Sandboxes.Connect(ctx, id)
	if err != nil {
		return err
	}
	req := platinum.ProcessStartRequest{Cmd: cmd, Env: env, Cwd: cwd, Stdin: true, Stdout: c.app.stdout, Stderr: c.app.stderr}
	if len(cmd) == 0 {
		req.Shell = shellLogin
	}
	// The process outlives ctx (Ctrl-C forwards SIGINT instead), so its
	// stream and input use a context of their own.
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	h, err := sb.Processes().Start(pctx, req)
	if err != nil {
		return err
	}
	defer h.Close()
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := c.app.stdin.Read(buf)
			if n > 0 {
				if h.SendInput(pctx, buf[:n]) != nil {
					return // the process ended; Wait reports it
				}
			}
			if err != nil {
				h.CloseStdin(pctx)
				return
			}
		}
	}()
	exited := make(chan struct{})
	var exit *platinum.ProcessExit
	var werr error
	go func() {
		defer close(exited)
		exit, werr = h.Wait(pctx)
	}()
	select {
	case <-exited:
	case <-ctx.Done():
		// Ctrl-C goes to the sandbox; a command that ignores it is killed.
		h.Signal(pctx, "SIGINT")
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			h.Kill(pctx)
			<-exited
		}
	}
	if werr != nil {
		return werr
	}
	if exit.TimedOut {
		return &exitError{code: exitTimedOut, msg: "the shell timed out and was killed"}
	}
	return exitWith(exit.ExitCode)
}

// interactive runs the command on a terminal over the PTY WebSocket,
// with pt's own terminal in raw mode so every key (Ctrl-C too) goes to
// the sandbox.
func (c *sandboxShell) interactive(ctx context.Context, in *os.File, id string, cmd []string, cwd string, env map[string]string) error {
	base := c.app.getenv("PT_API_URL")
	if base == "" {
		base = platinum.DefaultBaseURL
	}
	if err := platinum.CheckBaseURL(base); err != nil {
		return err
	}
	token := c.app.getenv("PT_TOKEN")
	if token == "" {
		return platinum.ErrNoToken
	}
	wsURL := "ws" + strings.TrimPrefix(strings.TrimRight(base, "/"), "http") + "/v1/sandboxes/" + id + "/pty"
	// The session lasts as long as the shell: Ctrl-C is a key, not an end.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	conn, resp, err := websocket.Dial(sctx, wsURL, &websocket.DialOptions{
		HTTPClient: c.app.httpClient,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}, "User-Agent": {"pt/" + version()}},
	})
	if err != nil {
		return handshakeError(resp, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)

	fd := int(in.Fd())
	cols, rows, err := term.GetSize(fd)
	if err != nil || cols <= 0 || rows <= 0 {
		cols, rows = 80, 24
	}
	start := map[string]any{"type": "start", "cols": cols, "rows": rows}
	if len(cmd) > 0 {
		start["cmd"] = cmd
	}
	if cwd != "" {
		start["cwd"] = cwd
	}
	if env != nil {
		start["env"] = env
	}
	if err := writeControl(sctx, conn, start); err != nil {
		return err
	}
	old, err := term.MakeRaw(fd)
	if err != nil {
		return fmt.Errorf("put the terminal in raw mode: %w", err)
	}
	defer term.Restore(fd, old)

	stopResize := notifyResize(func() {
		if cols, rows, err := term.GetSize(fd); err == nil {
			writeControl(sctx, conn, map[string]any{"type": "resize", "cols": cols, "rows": rows})
		}
	})
	defer stopResize()
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := in.Read(buf)
			if n > 0 && conn.Write(sctx, websocket.MessageBinary, buf[:n]) != nil {
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		_, data, err := conn.Read(sctx)
		if err != nil {
			term.Restore(fd, old)
			return shellEnd(err)
		}
		if _, err := c.app.stdout.Write(data); err != nil {
			return err
		}
	}
}

// writeControl sends one JSON control message.
func writeControl(ctx context.Context, conn *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return conn.Write(ctx, websocket.MessageText, b)
}

// shellEnd reads the close frame: "exit N" is the command's exit, 4000 +
// status an API error with its message.
func shellEnd(err error) error {
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		return fmt.Errorf("terminal connection lost: %w", err)
	}
	if ce.Code == websocket.StatusNormalClosure {
		if n, perr := strconv.Atoi(strings.TrimPrefix(ce.Reason, "exit ")); perr == nil {
			return exitWith(n)
		}
	}
	if ce.Code >= 4000 && ce.Code < 5000 {
		return &platinum.APIError{StatusCode: int(ce.Code) - 4000, Message: ce.Reason}
	}
	return fmt.Errorf("terminal closed: %d %s", ce.Code, ce.Reason)
}

// handshakeError turns a refused upgrade into the API's error.
func handshakeError(resp *http.Response, err error) error {
	if resp == nil || resp.StatusCode == http.StatusSwitchingProtocols {
		return err
	}
	var body map[string]any
	if resp.Body != nil {
		b, _ := io.ReadAll(resp.Body)
		json.Unmarshal(b, &body)
	}
	ae := &platinum.APIError{StatusCode: resp.StatusCode, Body: body}
	ae.Code, _ = body["code"].(string)
	ae.Message, _ = body["error"].(string)
	if ae.Message == "" {
		ae.Message = fmt.Sprintf("ptd refused the terminal: %s", resp.Status)
	}
	return ae
}
