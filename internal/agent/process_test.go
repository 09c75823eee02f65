package agent_test

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/api/gen/process"
	"github.com/platinum-dev/platinum/internal/testenv"
)

func TestStartEvents(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	tests := []struct {
		name       string
		script     string
		wantStdout string
		wantStderr string
		wantEnd    *process.ProcessEvent_EndEvent
	}{
		{"success", "echo out", "out\n", "", &process.ProcessEvent_EndEvent{ExitCode: 0, Exited: true, Status: "exit status 0"}},
		{"exit code and stderr", "echo oops >&2; exit 42", "", "oops\n",
			&process.ProcessEvent_EndEvent{ExitCode: 42, Exited: true, Status: "exit status 42", Error: ptr("exit status 42")}},
		{"killed by signal", "kill -TERM $$", "", "",
			&process.ProcessEvent_EndEvent{ExitCode: -1, Exited: false, Status: "signal: terminated", Error: ptr("signal: terminated")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := e.startAndCollect(ctx, t, &process.StartRequest{Process: shell(tc.script), Stdin: ptr(false)})
			if err != nil {
				t.Fatal(err)
			}
			if ev.kinds[0] != "start" || ev.kinds[len(ev.kinds)-1] != "end" || ev.pid == 0 {
				t.Fatalf("event order %v (pid %d), want start first and end last", ev.kinds, ev.pid)
			}
			if ev.stdout.String() != tc.wantStdout || ev.stderr.String() != tc.wantStderr {
				t.Fatalf("stdout %q stderr %q, want %q %q", ev.stdout.String(), ev.stderr.String(), tc.wantStdout, tc.wantStderr)
			}
			if diff := cmp.Diff(tc.wantEnd, ev.end, cmpProto); diff != "" {
				t.Fatalf("end (-want +got):\n%s", diff)
			}
		})
	}
}

var cmpProto = cmp.Comparer(func(a, b *process.ProcessEvent_EndEvent) bool {
	return a.GetExitCode() == b.GetExitCode() && a.GetExited() == b.GetExited() &&
		a.GetStatus() == b.GetStatus() && (a.Error == nil) == (b.Error == nil) && a.GetError() == b.GetError()
})

func TestStartRejects(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	tests := []struct {
		name string
		req  *process.StartRequest
		want connect.Code
	}{
		{"empty cmd", &process.StartRequest{Process: &process.ProcessConfig{}}, connect.CodeInvalidArgument},
		{"missing binary", &process.StartRequest{Process: &process.ProcessConfig{Cmd: "no-such-binary-xyz"}}, connect.CodeInvalidArgument},
		{"cwd with dotdot", &process.StartRequest{Process: &process.ProcessConfig{Cmd: "true", Cwd: ptr("/tmp/../etc")}}, connect.CodeInvalidArgument},
		{"unknown user", nil, connect.CodeUnauthenticated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := connect.NewRequest(tc.req)
			if tc.req == nil {
				req = connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "true"}})
				req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("no-such-user-xyz:")))
			}
			stream, err := e.proc.Start(ctx, req)
			if err == nil {
				for stream.Receive() {
				}
				err = stream.Err()
			}
			if connect.CodeOf(err) != tc.want {
				t.Fatalf("err = %v, want code %v", err, tc.want)
			}
		})
	}
}

func TestEnvAndCwd(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	initReq := `{"envVars":{"SANDBOX_ONLY":"s","SHARED":"from-sandbox"},"defaultWorkdir":` + strconv.Quote(dir) + `}`
	if status, _ := e.rawJSON(t, "/init", initReq, map[string]string{"X-Access-Token": testToken}); status != 204 {
		t.Fatalf("init: %d", status)
	}
	tests := []struct {
		name string
		cfg  *process.ProcessConfig
		want string
	}{
		{"layers", &process.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", `echo "$LANG|$SANDBOX_ONLY|$SHARED|$CALL"`},
			Envs: map[string]string{"SHARED": "from-call", "CALL": "c"}}, "C.UTF-8|s|from-call|c\n"},
		{"token not inherited", shell(`echo "${PT_AGENT_TOKEN:-unset}"`), "unset\n"},
		{"default workdir", shell("pwd"), dir + "\n"},
		{"explicit cwd", &process.ProcessConfig{Cmd: "pwd", Cwd: ptr("/")}, "/\n"},
		{"path from sandbox env default", shell("echo $PATH"), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := e.startAndCollect(ctx, t, &process.StartRequest{Process: tc.cfg, Stdin: ptr(false)})
			if err != nil {
				t.Fatal(err)
			}
			if ev.stdout.String() != tc.want {
				t.Fatalf("stdout = %q, want %q (stderr %q)", ev.stdout.String(), tc.want, ev.stderr.String())
			}
		})
	}
}

func TestRunAsUser(t *testing.T) {
	testenv.RequiresRoot(t)
	e := newEnv(t)
	ctx := testCtx(t)
	req := connect.NewRequest(&process.StartRequest{Process: shell(`echo "$(id -u) $USER $HOME"; pwd`), Stdin: ptr(false)})
	req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("nobody:")))
	ev, err := e.collect(ctx, t, req)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.SplitN(ev.stdout.String(), "\n", 2)[0]
	if got != "65534 nobody /nonexistent" {
		t.Fatalf("identity line = %q (stderr %q)", got, ev.stderr.String())
	}
}

// TestBackgroundConnect starts a process, drops the stream (the process
// keeps running), re-attaches with Connect by tag, feeds stdin and reads
// its end; a second Connect after it ended replays the end.
func TestBackgroundConnect(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	pid := e.startDetached(ctx, t, &process.StartRequest{
		Process: shell(`read line; echo "got:$line"; exit 5`), Tag: ptr("bg-1"),
	}) // stdin absent: defaults to open

	list, err := e.proc.List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := list.Msg.GetProcesses(); len(got) != 1 || got[0].GetPid() != pid || got[0].GetTag() != "bg-1" {
		t.Fatalf("list = %v, want pid %d tagged bg-1", got, pid)
	}

	conn, err := e.proc.Connect(ctx, connect.NewRequest(&process.ConnectRequest{
		Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: "bg-1"}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !conn.Receive() || conn.Msg().GetEvent().GetStart().GetPid() != pid {
		t.Fatalf("connect: first event %v, err %v; want start{%d}", conn.Msg(), conn.Err(), pid)
	}
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	if _, err := e.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{
		Process: sel, Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("hello\n")}},
	})); err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	if err := readEvents(ev, conn); err != nil {
		t.Fatal(err)
	}
	if ev.stdout.String() != "got:hello\n" || ev.end.GetExitCode() != 5 {
		t.Fatalf("stdout %q end %v", ev.stdout.String(), ev.end)
	}

	replay, err := e.proc.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: sel}))
	if err != nil {
		t.Fatal(err)
	}
	ev = &events{}
	readEvents(ev, replay)
	if diff := cmp.Diff([]string{"start", "end"}, ev.kinds); diff != "" || ev.end.GetExitCode() != 5 {
		t.Fatalf("replay kinds (-want +got):\n%s end %v", diff, ev.end)
	}
	if _, err := e.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: sel, Signal: process.Signal_SIGNAL_SIGKILL})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("signal after exit: %v, want not_found", err)
	}
}

func TestSendSignalKill(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	stream, ev, sel := e.startUntil(ctx, t, &process.StartRequest{Process: shell("echo ready; exec sleep 60"), Stdin: ptr(false)}, printed("ready"))
	if _, err := e.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: sel, Signal: process.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	if err := readEvents(ev, stream); err != nil {
		t.Fatal(err)
	}
	want := &process.ProcessEvent_EndEvent{ExitCode: -1, Exited: false, Status: "signal: killed", Error: ptr("signal: killed")}
	if diff := cmp.Diff(want, ev.end, cmpProto); diff != "" {
		t.Fatalf("end (-want +got):\n%s", diff)
	}
}

func TestStdinAndCloseStdin(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	stream, err := e.proc.Start(ctx, connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "wc", Args: []string{"-c"}}, Stdin: ptr(true)}))
	if err != nil {
		t.Fatal(err)
	}
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: startEvent(t, stream).GetPid()}}
	for range 3 {
		if _, err := e.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("abcd")}}})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	readEvents(ev, stream)
	if strings.TrimSpace(ev.stdout.String()) != "12" || ev.end.GetExitCode() != 0 {
		t.Fatalf("wc -c = %q, end %v", ev.stdout.String(), ev.end)
	}
}

func TestPTY(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	stream, ev, sel := e.startUntil(ctx, t, &process.StartRequest{
		Process: shell(`stty size; echo "term=$TERM"; read line; stty size; echo "got:$line"`),
		Pty:     &process.PTY{Size: &process.PTY_Size{Cols: 100, Rows: 30}},
	}, func(ev *events) bool { return strings.Contains(ev.pty.String(), "term=") })
	if _, err := e.proc.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: sel, Pty: &process.PTY{Size: &process.PTY_Size{Cols: 120, Rows: 40}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte("typed\n")}}})); err != nil {
		t.Fatal(err)
	}
	if err := readEvents(ev, stream); err != nil {
		t.Fatal(err)
	}
	out := strings.ReplaceAll(ev.pty.String(), "\r\n", "\n")
	for _, want := range []string{"30 100\n", "term=xterm-256color\n", "40 120\n", "got:typed\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("pty output %q lacks %q", out, want)
		}
	}
	if ev.stdout.Len() != 0 || ev.end.GetExitCode() != 0 {
		t.Errorf("stdout %q (want none, PTY output is data.pty), end %v", ev.stdout.String(), ev.end)
	}
}

func TestStreamDeadlineKills(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := e.startAndCollect(sctx, t, &process.StartRequest{Process: shell("echo $$ > " + pidFile + "; exec sleep 60"), Stdin: ptr(false)})
	if code := connect.CodeOf(err); code != connect.CodeDeadlineExceeded {
		t.Fatalf("err = %v, want deadline_exceeded", err)
	}
	// The agent sees its own copy of the deadline (Connect-Timeout-Ms) and
	// kills the process; wait (bounded by ctx) until it is gone.
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	for {
		list, err := e.proc.List(ctx, connect.NewRequest(&process.ListRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Msg.GetProcesses()) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			unix.Kill(pid, unix.SIGKILL)
			t.Fatalf("process %d still running after its stream deadline", pid)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestGrandchildHoldsStdout: a background grandchild keeps stdout open, yet
// the end event still arrives (after the bounded drain) while it runs.
func TestGrandchildHoldsStdout(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				unix.Kill(pid, unix.SIGKILL)
			}
		}
	})
	ev, err := e.startAndCollect(ctx, t, &process.StartRequest{
		Process: shell("sleep 60 & echo $! > " + pidFile + "; echo parent-done"), Stdin: ptr(false),
	})
	if err != nil {
		t.Fatal(err)
	}
	if ev.end == nil || ev.end.GetExitCode() != 0 || ev.stdout.String() != "parent-done\n" {
		t.Fatalf("end %v stdout %q", ev.end, ev.stdout.String())
	}
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := unix.Kill(pid, 0); err != nil {
		t.Fatalf("grandchild %d should still hold stdout while end arrived: %v", pid, err)
	}
}

func TestKeepalive(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	req := connect.NewRequest(&process.StartRequest{Process: shell("sleep 2.5"), Stdin: ptr(false)})
	req.Header().Set("Keepalive-Ping-Interval", "1")
	ev, err := e.collect(ctx, t, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.kinds) < 3 || ev.kinds[0] != "start" || ev.kinds[1] != "keepalive" || ev.kinds[len(ev.kinds)-1] != "end" {
		t.Fatalf("kinds = %v, want start, keepalive..., end", ev.kinds)
	}
}

func TestConnectUnknown(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	stream, err := e.proc.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: 999999}}}))
	if err == nil {
		for stream.Receive() {
		}
		err = stream.Err()
	}
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeNotFound {
		t.Fatalf("err = %v, want not_found", err)
	}
}
