package agentclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// collect reads a stream to its end and returns stdout+pty and the end.
func collect(t *testing.T, s *agentclient.ProcessStream) (string, *agentclient.ExitResult) {
	t.Helper()
	var out strings.Builder
	for {
		ev, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		out.Write(ev.Stdout)
		out.Write(ev.PTY)
		if ev.End != nil {
			return out.String(), ev.End
		}
	}
}

// TestProcessOutlivesItsStream: cancelling the context of a start stream
// (with a deadline, which must not reach the agent) detaches only; the
// process keeps running, can be listed, fed and re-attached.
func TestProcessOutlivesItsStream(t *testing.T) {
	c := agentclient.New(startAgent(t), token, nil)
	ctx := testCtx(t)
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	s, err := c.StartProcess(sctx, agentclient.ProcessRequest{Cmd: "cat", Stdin: true, Tag: "keep"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Pid == 0 || s.Cwd == "" {
		t.Fatalf("start: pid %d cwd %q, want both", s.Pid, s.Cwd)
	}
	<-sctx.Done()
	if _, err := s.Next(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next after the context ended: %v, want it to wrap the deadline", err)
	}
	s.Close()
	list, err := c.ListProcesses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Pid != s.Pid || list[0].Tag == nil || *list[0].Tag != "keep" || !list[0].Stdin || list[0].PTY || list[0].Argv[0] != "cat" {
		t.Fatalf("list = %+v, want the cat process still running", list)
	}
	conn, err := c.ConnectProcess(ctx, s.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := c.ProcessInput(ctx, s.Pid, []byte("echoed\n"), true); err != nil {
		t.Fatal(err)
	}
	out, end := collect(t, conn)
	if out != "echoed\n" || end.Code != 0 || end.TimedOut {
		t.Fatalf("output %q end %+v, want the input echoed and exit 0", out, end)
	}
}

func TestProcessTimeoutAndSignals(t *testing.T) {
	c := agentclient.New(startAgent(t), token, nil)
	ctx := testCtx(t)
	s, err := c.StartProcess(ctx, agentclient.ProcessRequest{Cmd: "sleep", Args: []string{"60"}, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, end := collect(t, s); !end.TimedOut || end.Code != -1 {
		t.Fatalf("end %+v, want timed out with exit -1", end)
	}

	s2, err := c.StartProcess(ctx, agentclient.ProcessRequest{Cmd: "sleep", Args: []string{"60"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := c.Signal(ctx, s2.Pid, int(unix.SIGINT)); err != nil {
		t.Fatal(err)
	}
	if _, end := collect(t, s2); end.Status != "signal: interrupt" || end.Code != -1 || end.TimedOut {
		t.Fatalf("end %+v, want signal: interrupt, exit -1", end)
	}
	if err := c.Signal(ctx, s2.Pid, int(unix.SIGTERM)); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("signal after exit: %v, want not found", err)
	}
}

func TestProcessConflicts(t *testing.T) {
	c := agentclient.New(startAgent(t), token, nil)
	ctx := testCtx(t)
	s, err := c.StartProcess(ctx, agentclient.ProcessRequest{Cmd: "sleep", Args: []string{"60"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer c.Kill(context.WithoutCancel(ctx), s.Pid)
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"input without stdin", func() error { return c.ProcessInput(ctx, s.Pid, []byte("x"), false) }, sandbox.ErrConflict},
		{"eof without stdin", func() error { return c.ProcessInput(ctx, s.Pid, nil, true) }, sandbox.ErrConflict},
		{"resize without pty", func() error { return c.ResizePTY(ctx, s.Pid, agentclient.PTYSize{Cols: 10, Rows: 10}) }, sandbox.ErrConflict},
		{"unknown pid connect", func() error { _, err := c.ConnectProcess(ctx, 999999); return err }, sandbox.ErrNotFound},
		{"unknown pid input", func() error { return c.ProcessInput(ctx, 999999, []byte("x"), false) }, sandbox.ErrNotFound},
		{"unsupported signal", func() error { return c.Signal(ctx, s.Pid, int(unix.SIGSEGV)) }, sandbox.ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}
