package e2e

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// waitBuf is an io.Writer the SDK's output goroutine writes to while the
// test waits for text to appear in it.
type waitBuf struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newWaitBuf() *waitBuf { return &waitBuf{changed: make(chan struct{}, 1)} }

func (w *waitBuf) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	select {
	case w.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *waitBuf) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// send writes input to the process's stdin, then waits (bounded by ctx)
// for want to appear.
func (w *waitBuf) send(ctx context.Context, t *testing.T, p interface {
	SendInput(context.Context, []byte) error
}, input, want string) {
	t.Helper()
	if err := p.SendInput(ctx, []byte(input)); err != nil {
		t.Fatal(err)
	}
	w.until(ctx, t, want)
}

// until waits (bounded by ctx) for want to appear.
func (w *waitBuf) until(ctx context.Context, t *testing.T, want string) {
	t.Helper()
	for !strings.Contains(w.String(), want) {
		select {
		case <-w.changed:
		case <-ctx.Done():
			t.Fatalf("output %q never held %q", w.String(), want)
		}
	}
}

// TestGoSDKProcesses drives the Go SDK's processes API against a real ptd.
func TestGoSDKProcesses(t *testing.T) {
	requireEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := platinum.New(env.url, env.token)
	sb, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"}, platinum.WaitForRunning(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), sb.ID) })
	h, err := cl.Sandboxes.Connect(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	procs := h.Processes()

	t.Run("attached start streams output as it comes", func(t *testing.T) {
		out, errOut := newWaitBuf(), newWaitBuf()
		p, err := procs.Start(ctx, platinum.ProcessStartRequest{
			Shell:  "echo a; echo e >&2; while [ ! -e /tmp/sdk-gate ]; do sleep 0.05; done; echo b; exit 3",
			Stdout: out, Stderr: errOut,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		out.until(ctx, t, "a\n")
		errOut.until(ctx, t, "e\n")
		if strings.Contains(out.String(), "b") {
			t.Fatalf("b before the gate: %q", out.String())
		}
		if _, err := h.Exec(ctx, platinum.ExecRequest{Shell: "touch /tmp/sdk-gate"}); err != nil {
			t.Fatal(err)
		}
		exit, err := p.Wait(ctx)
		if err != nil || exit.ExitCode != 3 || exit.TimedOut || out.String() != "a\nb\n" {
			t.Fatalf("wait = %+v, %v; stdout %q", exit, err, out.String())
		}
	})

	t.Run("detached start, list, connect, input, eof", func(t *testing.T) {
		p, err := procs.Start(ctx, platinum.ProcessStartRequest{Cmd: []string{"cat"}, Stdin: true, Tag: "sdk-cat"})
		if err != nil {
			t.Fatal(err)
		}
		list, err := procs.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(list, func(x platinum.Process) bool { return x.PID == p.PID() })
		if i < 0 || list[i].Tag != "sdk-cat" || !list[i].Stdin || list[i].PTY || !slices.Equal(list[i].Cmd, []string{"cat"}) {
			t.Fatalf("list = %+v, want pid %d tagged sdk-cat with stdin", list, p.PID())
		}
		out := newWaitBuf()
		a, err := procs.Connect(ctx, p.PID(), out, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		out.send(ctx, t, a, "hi\x00there\n", "hi\x00there\n")
		if err := a.CloseStdin(ctx); err != nil {
			t.Fatal(err)
		}
		if exit, err := a.Wait(ctx); err != nil || exit.ExitCode != 0 {
			t.Fatalf("wait = %+v, %v", exit, err)
		}
	})

	t.Run("signals and kill", func(t *testing.T) {
		p, err := procs.Start(ctx, platinum.ProcessStartRequest{Cmd: []string{"sleep", "100"}})
		if err != nil {
			t.Fatal(err)
		}
		var ae *platinum.APIError
		if err := p.Signal(ctx, "SIGBOGUS"); !errors.As(err, &ae) || ae.Code != platinum.CodeInvalidRequest || ae.Field() != "signal" {
			t.Fatalf("bad signal: %v, want invalid_request on field signal", err)
		}
		a, err := procs.Connect(ctx, p.PID(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if err := p.Signal(ctx, "SIGTERM"); err != nil {
			t.Fatal(err)
		}
		if exit, err := a.Wait(ctx); err != nil || exit.ExitCode != -1 || exit.TimedOut {
			t.Fatalf("wait after SIGTERM = %+v, %v", exit, err)
		}
		if err := p.Kill(ctx); !platinum.IsNotFound(err) {
			t.Fatalf("kill after exit: %v, want not_found", err)
		}
	})

	// The harness starts ptd with SIGHUP and SIGINT ignored, as nohup or a
	// script's background job does (ptdtest.Daemon.launch): a sandbox's
	// processes must still end on both.
	for _, sig := range []string{"SIGHUP", "SIGINT"} {
		t.Run(sig+" ends a process whatever ptd was started with", func(t *testing.T) {
			p, err := procs.Start(ctx, platinum.ProcessStartRequest{Cmd: []string{"sleep", "100"}})
			if err != nil {
				t.Fatal(err)
			}
			a, err := procs.Connect(ctx, p.PID(), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if err := p.Signal(ctx, sig); err != nil {
				t.Fatal(err)
			}
			if exit, err := a.Wait(ctx); err != nil || exit.ExitCode != -1 {
				t.Fatalf("wait after %s = %+v, %v, want ended by it", sig, exit, err)
			}
		})
	}

	t.Run("pty size and resize", func(t *testing.T) {
		out := newWaitBuf()
		p, err := procs.Start(ctx, platinum.ProcessStartRequest{Cmd: []string{"sh"}, PTY: &platinum.PTYSize{Cols: 80, Rows: 24}, Stdout: out})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		out.send(ctx, t, p, "stty size\n", "24 80")
		if err := p.Resize(ctx, platinum.PTYSize{Cols: 100, Rows: 30}); err != nil {
			t.Fatal(err)
		}
		out.send(ctx, t, p, "stty size\n", "30 100")
		if err := p.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		if exit, err := p.Wait(ctx); err != nil || exit.ExitCode != -1 {
			t.Fatalf("wait after kill = %+v, %v", exit, err)
		}
	})

	t.Run("timeout and detach", func(t *testing.T) {
		p, err := procs.Start(ctx, platinum.ProcessStartRequest{Cmd: []string{"sleep", "100"}, Timeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if exit, err := p.Wait(ctx); err != nil || !exit.TimedOut || exit.ExitCode != -1 {
			t.Fatalf("wait = %+v, %v; want timed out", exit, err)
		}
		q, err := procs.Start(ctx, platinum.ProcessStartRequest{Cmd: []string{"sleep", "100"}, Stdout: newWaitBuf()})
		if err != nil {
			t.Fatal(err)
		}
		q.Close()
		list, err := procs.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(list, func(x platinum.Process) bool { return x.PID == q.PID() }) {
			t.Fatalf("pid %d gone after Close: %+v", q.PID(), list)
		}
		if _, err := q.Wait(ctx); err == nil {
			t.Fatal("Wait on a closed handle returned no error")
		}
		if err := q.Kill(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("conflicts and unknown pids", func(t *testing.T) {
		p, err := procs.Start(ctx, platinum.ProcessStartRequest{Cmd: []string{"sleep", "100"}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Kill(context.Background())
		if err := p.SendInput(ctx, []byte("x")); !platinum.IsCode(err, platinum.CodeConflict) {
			t.Errorf("input without stdin: %v, want conflict", err)
		}
		if err := p.Resize(ctx, platinum.PTYSize{Cols: 10, Rows: 10}); !platinum.IsCode(err, platinum.CodeConflict) {
			t.Errorf("resize without pty: %v, want conflict", err)
		}
		if _, err := procs.Connect(ctx, 999999, nil, nil); !platinum.IsNotFound(err) {
			t.Errorf("connect unknown pid: %v, want not_found", err)
		}
	})
}
