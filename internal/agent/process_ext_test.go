package agent_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/api/gen/process"
	"github.com/platinum-dev/platinum/api/gen/process/processconnect"
	"github.com/platinum-dev/platinum/internal/agent"
)

// TestTimeoutKillsDetached: StartRequest.timeout_ms kills the process even
// though its stream was closed right after start, and a Connect stream
// sees the end marked timed_out.
func TestTimeoutKillsDetached(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	pid := e.startDetached(ctx, t, &process.StartRequest{
		Process: shell("exec sleep 60"), Stdin: ptr(false), TimeoutMs: 300,
	})
	conn, err := e.proc.Connect(ctx, connect.NewRequest(&process.ConnectRequest{
		Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	if err := readEvents(ev, conn); err != nil {
		unix.Kill(int(pid), unix.SIGKILL)
		t.Fatal(err)
	}
	if !ev.end.GetTimedOut() || ev.end.GetExitCode() != -1 || ev.end.GetStatus() != "signal: killed" {
		t.Fatalf("end %v, want timed_out, exit -1, signal: killed", ev.end)
	}
}

// TestTimeoutNotReachedIsNotTimedOut: a process that ends before its
// timeout reports its own exit.
func TestTimeoutNotReachedIsNotTimedOut(t *testing.T) {
	e := newEnv(t)
	ev, err := e.startAndCollect(testCtx(t), t, &process.StartRequest{Process: shell("exit 3"), Stdin: ptr(false), TimeoutMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	if ev.end.GetTimedOut() || ev.end.GetExitCode() != 3 {
		t.Fatalf("end %v, want exit 3 not timed out", ev.end)
	}
}

// TestSignalNumbers: signals beyond envd's two arrive as their Linux
// numbers; anything else is invalid_argument.
func TestSignalNumbers(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	tests := []struct {
		name       string
		sig        process.Signal
		wantCode   connect.Code
		wantStatus string
	}{
		{"SIGINT", process.Signal(unix.SIGINT), 0, "signal: interrupt"},
		{"SIGHUP", process.Signal(unix.SIGHUP), 0, "signal: hangup"},
		{"SIGUSR1", process.Signal(unix.SIGUSR1), 0, "signal: user defined signal 1"},
		{"SIGSEGV not sendable", process.Signal(unix.SIGSEGV), connect.CodeInvalidArgument, ""},
		{"unspecified", process.Signal_SIGNAL_UNSPECIFIED, connect.CodeInvalidArgument, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stream, ev, sel := e.startUntil(ctx, t, &process.StartRequest{Process: shell("echo ready; exec sleep 60"), Stdin: ptr(false)}, printed("ready"))
			_, err := e.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: sel, Signal: tc.sig}))
			if tc.wantCode != 0 {
				if connect.CodeOf(err) != tc.wantCode {
					t.Errorf("signal %v: %v, want %v", tc.sig, err, tc.wantCode)
				}
				_, _ = e.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: sel, Signal: process.Signal_SIGNAL_SIGKILL}))
			} else if err != nil {
				t.Fatal(err)
			}
			readEvents(ev, stream)
			if tc.wantStatus != "" && ev.end.GetStatus() != tc.wantStatus {
				t.Fatalf("end %v, want status %q", ev.end, tc.wantStatus)
			}
		})
	}
}

// TestPTYTakesStdinAndEOF: stdin input to a PTY process goes to its
// terminal, CloseStdin types Ctrl-D, and List describes it.
func TestPTYTakesStdinAndEOF(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	// Extension fields (start cwd, list pty/cwd/stdin) come only on request.
	extProc := processconnect.NewProcessClient(e.ts.Client(), e.ts.URL,
		connect.WithInterceptors(headerInterceptor{"X-Access-Token": testToken, agent.HeaderExtensions: "1"}))
	stream, err := extProc.Start(ctx, connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "cat", Cwd: &dir},
		Pty:     &process.PTY{Size: &process.PTY_Size{Cols: 80, Rows: 24}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	start := startEvent(t, stream)
	if start.GetCwd() != dir {
		t.Errorf("start cwd %q, want %q", start.GetCwd(), dir)
	}
	plain, err := e.proc.List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := plain.Msg.GetProcesses(); len(got) != 1 || got[0].GetPty() || got[0].GetCwd() != "" {
		t.Errorf("list without the extensions header = %v, want envd's fields only", got)
	}
	list, err := extProc.List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := list.Msg.GetProcesses(); len(got) != 1 || !got[0].GetPty() || got[0].GetCwd() != dir || got[0].GetStdin() {
		t.Errorf("list = %v, want one pty process in %s without a stdin pipe", got, dir)
	}
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: start.GetPid()}}
	if _, err := e.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("via-stdin\n")}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	if err := readEvents(ev, stream); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ev.pty.String(), "via-stdin") || ev.end.GetExitCode() != 0 {
		t.Fatalf("pty output %q, end %v; want the echoed line and exit 0 after Ctrl-D", ev.pty.String(), ev.end)
	}
}
