package agentclient_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/agent"
	"github.com/platinum-dev/platinum/internal/agent/agenttest"
	"github.com/platinum-dev/platinum/internal/agent/envscript"
	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/testenv"
)

const token = "client-test-token"

// startAgent serves an in-process agent and returns its base URL.
func startAgent(t *testing.T) string {
	t.Helper()
	cfg := agent.DefaultConfig()
	cfg.Token = token
	cfg.DefaultUser = agenttest.CurrentUser(t)
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	_, ts := agenttest.Serve(t, cfg)
	return ts.URL
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// collector gathers output safely from callbacks.
type collector struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *collector) write(b []byte) {
	c.mu.Lock()
	c.buf.Write(b)
	c.mu.Unlock()
}

func (c *collector) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func TestExec(t *testing.T) {
	c := agentclient.New(startAgent(t), token, nil)
	ctx := testCtx(t)
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Init(ctx, map[string]string{"FROM_INIT": "i", "OVERRIDE": "init"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bigStdin := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB, several SendInput chunks
	tests := []struct {
		name       string
		req        agentclient.ExecRequest
		wantStdout string
		wantStderr string
		want       agentclient.ExitResult
	}{
		{"exit code", agentclient.ExecRequest{Cmd: "sh", Args: []string{"-c", "exit 7"}}, "", "",
			agentclient.ExitResult{Code: 7, Status: "exit status 7"}},
		{"stdout and stderr", agentclient.ExecRequest{Cmd: "sh", Args: []string{"-c", "echo out; echo err >&2"}}, "out\n", "err\n",
			agentclient.ExitResult{Code: 0, Status: "exit status 0"}},
		{"env layering", agentclient.ExecRequest{Cmd: "sh", Args: []string{"-c", `echo "$FROM_INIT $OVERRIDE $CALL"`},
			Env: map[string]string{"OVERRIDE": "call", "CALL": "c"}}, "i call c\n", "",
			agentclient.ExitResult{Code: 0, Status: "exit status 0"}},
		{"cwd", agentclient.ExecRequest{Cmd: "pwd", Cwd: dir}, dir + "\n", "",
			agentclient.ExitResult{Code: 0, Status: "exit status 0"}},
		{"stdin", agentclient.ExecRequest{Cmd: "wc", Args: []string{"-c"}, Stdin: bigStdin}, strconv.Itoa(len(bigStdin)) + "\n", "",
			agentclient.ExitResult{Code: 0, Status: "exit status 0"}},
		{"empty stdin is closed at once", agentclient.ExecRequest{Cmd: "cat", Stdin: []byte{}}, "", "",
			agentclient.ExitResult{Code: 0, Status: "exit status 0"}},
		{"no stdin reads /dev/null", agentclient.ExecRequest{Cmd: "cat"}, "", "",
			agentclient.ExitResult{Code: 0, Status: "exit status 0"}},
		{"signaled", agentclient.ExecRequest{Cmd: "sh", Args: []string{"-c", "kill -KILL $$"}}, "", "",
			agentclient.ExitResult{Code: -1, Signaled: true, Status: "signal: killed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr collector
			got, err := c.Exec(ctx, tc.req, stdout.write, stderr.write)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if stdout.String() != tc.wantStdout || stderr.String() != tc.wantStderr {
				t.Errorf("stdout %q stderr %q, want %q %q", stdout.String(), stderr.String(), tc.wantStdout, tc.wantStderr)
			}
		})
	}

	t.Run("invalid cwd", func(t *testing.T) {
		_, err := c.Exec(ctx, agentclient.ExecRequest{Cmd: "true", Cwd: filepath.Join(dir, "missing")}, nil, nil)
		if !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Fatalf("err = %v, want ErrInvalidArgument", err)
		}
	})
}

func TestExecTimeoutKills(t *testing.T) {
	c := agentclient.New(startAgent(t), token, nil)
	ctx := testCtx(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	res, err := c.Exec(ctx, agentclient.ExecRequest{
		Cmd: "sh", Args: []string{"-c", "echo $$ > " + pidFile + "; exec sleep 60"}, Timeout: 300 * time.Millisecond,
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := agentclient.ExitResult{Code: -1, Signaled: true, Status: "signal: killed", TimedOut: true}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Fatalf("result (-want +got):\n%s", diff)
	}
	waitGone(ctx, t, pidFile, "its timeout")
}

// TestExecTimeoutBeforeStart: an agent so slow (a saturated host) that the
// command's timeout passes before its start arrives gives the timeout's
// result, as a command that ran too long does, not an error the API would
// answer 504; the caller's own cancel stays an error.
func TestExecTimeoutBeforeStart(t *testing.T) {
	ctx := testCtx(t)
	c := agentclient.New(fakeAgent(t, func(c net.Conn) {
		defer c.Close()
		io.Copy(io.Discard, c) // reads the request, never answers
	}), token, nil)
	res, err := c.Exec(ctx, agentclient.ExecRequest{Cmd: "true", Timeout: 100 * time.Millisecond}, nil, nil)
	if err != nil || !res.TimedOut || res.Code != -1 {
		t.Fatalf("exec past its timeout before start: %+v, %v; want a timed-out result", res, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if res, err := c.Exec(cctx, agentclient.ExecRequest{Cmd: "true", Timeout: time.Minute}, nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exec whose caller gave up: %+v, %v; want context.DeadlineExceeded", res, err)
	}
}

func TestExecCancelKills(t *testing.T) {
	c := agentclient.New(startAgent(t), token, nil)
	ctx := testCtx(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, err := c.Exec(cctx, agentclient.ExecRequest{Cmd: "sh", Args: []string{"-c", "echo $$ > " + pidFile + "; echo ready; exec sleep 60"}},
		func(b []byte) {
			if strings.Contains(string(b), "ready") {
				cancel()
			}
		}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	waitGone(ctx, t, pidFile, "the caller's cancel")
}

// waitGone waits (bounded by ctx) until the process whose pid is in
// pidFile is gone or a zombie about to be reaped, and fails the test,
// killing it, if it is still there when ctx ends: it should have died of
// what.
func waitGone(ctx context.Context, t *testing.T, pidFile, what string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	for unix.Kill(pid, 0) == nil && !isZombie(pid) {
		select {
		case <-ctx.Done():
			unix.Kill(pid, unix.SIGKILL)
			t.Fatalf("process %d survived %s", pid, what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

func TestFiles(t *testing.T) {
	c := agentclient.New(startAgent(t), token, nil)
	ctx := testCtx(t)
	dir := t.TempDir()
	content := make([]byte, 10<<20)
	rand.Read(content)
	p := filepath.Join(dir, "deep", "er", "blob.bin")

	if err := c.Upload(ctx, p, bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	rc, err := c.Download(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content) {
		t.Fatalf("downloaded %d bytes differ from the %d uploaded", len(got), len(content))
	}

	st, err := c.Stat(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != int64(len(content)) || st.Type != "file" || st.Name != "blob.bin" || st.Path != p || st.Mode.Perm() != 0o644 {
		t.Fatalf("stat = %+v", st)
	}

	entries, err := c.ListDir(ctx, filepath.Join(dir, "deep"), 2)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range entries {
		paths = append(paths, e.Type+":"+e.Path)
	}
	if diff := cmp.Diff([]string{"dir:" + filepath.Join(dir, "deep", "er"), "file:" + p}, paths); diff != "" {
		t.Fatalf("list (-want +got):\n%s", diff)
	}

	for i, want := range []bool{true, false} {
		created, err := c.MakeDir(ctx, filepath.Join(dir, "m", "n"))
		if err != nil || created != want {
			t.Fatalf("mkdir #%d: created %v, %v; want %v", i+1, created, err, want)
		}
	}
	if err := c.Remove(ctx, filepath.Join(dir, "deep")); err != nil {
		t.Fatal(err)
	}

	errTests := []struct {
		name string
		call func() error
		want error
	}{
		{"mkdir over a file", func() error {
			f := filepath.Join(dir, "plain")
			os.WriteFile(f, nil, 0o644)
			_, err := c.MakeDir(ctx, f)
			return err
		}, sandbox.ErrInvalidArgument},
		{"remove missing", func() error { return c.Remove(ctx, filepath.Join(dir, "deep")) }, sandbox.ErrNotFound},
		{"stat missing", func() error { _, err := c.Stat(ctx, p); return err }, sandbox.ErrNotFound},
		{"list missing", func() error { _, err := c.ListDir(ctx, filepath.Join(dir, "deep"), 1); return err }, sandbox.ErrNotFound},
		{"download missing", func() error { _, err := c.Download(ctx, p); return err }, sandbox.ErrNotFound},
		{"download directory", func() error { _, err := c.Download(ctx, dir); return err }, sandbox.ErrInvalidArgument},
		{"upload dotdot", func() error { return c.Upload(ctx, dir+"/../x", strings.NewReader("x")) }, sandbox.ErrInvalidArgument},
		{"stat dotdot", func() error { _, err := c.Stat(ctx, dir+"/../x"); return err }, sandbox.ErrInvalidArgument},
	}
	for _, tc := range errTests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestUnavailableAndAuth(t *testing.T) {
	ctx := testCtx(t)
	deadURL := "http://" + testenv.RefusedAddr(t)

	dead := agentclient.New(deadURL, token, nil)
	calls := map[string]func() error{
		"health": func() error { return dead.Health(ctx) },
		"exec":   func() error { _, err := dead.Exec(ctx, agentclient.ExecRequest{Cmd: "true"}, nil, nil); return err },
		"stat":   func() error { _, err := dead.Stat(ctx, "/"); return err },
		"upload": func() error { return dead.Upload(ctx, "/tmp/x", strings.NewReader("x")) },
		"init":   func() error { return dead.Init(ctx, nil) },
	}
	for name, call := range calls {
		t.Run("unreachable "+name, func(t *testing.T) {
			if err := call(); !errors.Is(err, sandbox.ErrUnavailable) {
				t.Fatalf("err = %v, want ErrUnavailable", err)
			}
		})
	}
	t.Run("wait ready gives up with ctx", func(t *testing.T) {
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		err := dead.WaitReady(wctx)
		if !errors.Is(err, sandbox.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrUnavailable and DeadlineExceeded", err)
		}
	})

	wrong := agentclient.New(startAgent(t), "wrong-token", nil)
	if err := wrong.Health(ctx); err != nil {
		t.Fatalf("health needs no token: %v", err)
	}
	if _, err := wrong.Stat(ctx, "/"); !errors.Is(err, sandbox.ErrUnauthenticated) {
		t.Fatalf("stat with wrong token: %v", err)
	}
	if err := wrong.Upload(ctx, filepath.Join(t.TempDir(), "x"), strings.NewReader("x")); !errors.Is(err, sandbox.ErrUnauthenticated) {
		t.Fatalf("upload with wrong token: %v", err)
	}
}

func TestWaitReadyBeforeServing(t *testing.T) {
	ctx := testCtx(t)
	cfg := agent.DefaultConfig()
	cfg.Token = token
	cfg.DefaultUser = agenttest.CurrentUser(t)
	srv, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	t.Cleanup(func() { srv.Close(); ts.Close() })
	c := agentclient.New("http://"+ts.Listener.Addr().String(), token, nil)
	done := make(chan error, 1)
	go func() { done <- c.WaitReady(ctx) }()
	ts.Start() // accepted connections are served only from now on
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestH2C(t *testing.T) {
	ctx := testCtx(t)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true) // prior knowledge h2c only
	t.Cleanup(tr.CloseIdleConnections)
	c := agentclient.New(startAgent(t), token, &http.Client{Transport: tr})
	var out collector
	res, err := c.Exec(ctx, agentclient.ExecRequest{Cmd: "echo", Args: []string{"over", "h2c"}}, out.write, nil)
	if err != nil || res.Code != 0 || out.String() != "over h2c\n" {
		t.Fatalf("exec over h2c: %v %+v %q", err, res, out.String())
	}
}

// TestNoSpace fills a tiny tmpfs so the agent answers 507.
func TestNoSpace(t *testing.T) {
	testenv.RequiresRoot(t)
	ctx := testCtx(t)
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	c := agentclient.New(startAgent(t), token, nil)
	err := c.Upload(ctx, filepath.Join(mnt, "big"), bytes.NewReader(make([]byte, 1<<20)))
	if !errors.Is(err, agentclient.ErrNoSpace) {
		t.Fatalf("err = %v, want ErrNoSpace", err)
	}
}

// fakeAgent listens on loopback in place of pt-agent, hands every
// connection to answer on a goroutine of its own, and returns the base URL
// a client dials it at: for answers a real agent gives only when things
// break.
func fakeAgent(t *testing.T, answer func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go answer(c)
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestResetMidCallIsUnavailable: an agent that drops the connection while
// answering (it crashed, or the sandbox stopped under it) is
// ErrUnavailable, which the API answers 503, never an internal error.
func TestResetMidCallIsUnavailable(t *testing.T) {
	ctx := testCtx(t)
	c := agentclient.New(fakeAgent(t, func(c net.Conn) {
		// Read the request's head, answer the start of a stream, then reset.
		buf := make([]byte, 4096)
		n, _ := c.Read(buf)
		head := "HTTP/1.1 200 OK\r\nContent-Type: application/proto\r\nContent-Length: 100\r\n\r\n"
		if strings.Contains(string(buf[:n]), "/Start ") {
			head = "HTTP/1.1 200 OK\r\nContent-Type: application/connect+proto\r\nTransfer-Encoding: chunked\r\n\r\n"
		}
		_, _ = io.WriteString(c, head)
		time.Sleep(20 * time.Millisecond)
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}), token, nil)
	for name, call := range map[string]func() error{
		"exec": func() error { _, err := c.Exec(ctx, agentclient.ExecRequest{Cmd: "true"}, nil, nil); return err },
		"stat": func() error { _, err := c.Stat(ctx, "/"); return err },
	} {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, sandbox.ErrUnavailable) {
				t.Fatalf("err = %v, want ErrUnavailable", err)
			}
		})
	}
}

// TestInitRedials: an agent whose port is not open yet when Init is sent
// (a guest network coming up) gets the init once it listens.
func TestInitRedials(t *testing.T) {
	ctx := testCtx(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	got := make(chan string, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r.URL.Path + " " + string(b)
	})}
	t.Cleanup(func() { srv.Close() })
	time.AfterFunc(200*time.Millisecond, func() {
		if ln, err := net.Listen("tcp", addr); err == nil {
			go srv.Serve(ln)
		}
	})
	if err := agentclient.New("http://"+addr, token, nil).Init(ctx, map[string]string{"A": "1"}); err != nil {
		t.Fatalf("init: %v", err)
	}
	if g := <-got; !strings.HasPrefix(g, "/init ") || !strings.Contains(g, `"A":"1"`) {
		t.Fatalf("agent got %q", g)
	}
}

// TestUnreadRequestIsUnavailable: when pt-agent's HTTP server cannot parse
// a request it answers a plain-text 400 before any handler runs (seen under
// heavy load). That is not the caller's bad input: the call answers
// ErrUnavailable (503, safe to retry), for a stream and a plain endpoint.
func TestUnreadRequestIsUnavailable(t *testing.T) {
	ctx := testCtx(t)
	c := agentclient.New(fakeAgent(t, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 4096)
		_, _ = c.Read(buf)
		// What net/http's server writes for a request it cannot parse.
		_, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request")
	}), token, nil)
	for name, call := range map[string]func() error{
		"exec":   func() error { _, err := c.Exec(ctx, agentclient.ExecRequest{Cmd: "true"}, nil, nil); return err },
		"stat":   func() error { _, err := c.Stat(ctx, "/"); return err },
		"upload": func() error { return c.Upload(ctx, "/tmp/x", strings.NewReader("x")) },
	} {
		t.Run(name, func(t *testing.T) {
			err := call()
			if !errors.Is(err, sandbox.ErrUnavailable) || errors.Is(err, sandbox.ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrUnavailable only", err)
			}
		})
	}
}

// TestInitEnvScript: Init with EnvScript has a current agent write
// /etc/pt-env in the same request, and uploads the file itself to an
// agent that does not answer that it did (one older than the field).
func TestInitEnvScript(t *testing.T) {
	env := map[string]string{"A": "it's", "B": "2"}
	t.Run("agent writes it", func(t *testing.T) {
		cfg := agent.DefaultConfig()
		cfg.Token = token
		cfg.EnvScript = filepath.Join(t.TempDir(), "pt-env")
		ag, _ := agenttest.Serve(t, cfg)
		// This agent runs on the test's host: an upload would write its
		// /etc/pt-env, so it is refused.
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/files" {
				t.Errorf("uploaded %s although the agent wrote it", r.URL.Query().Get("path"))
				w.WriteHeader(http.StatusForbidden)
				return
			}
			ag.ServeHTTP(w, r)
		}))
		t.Cleanup(ts.Close)
		if err := agentclient.New(ts.URL, token, nil).InitWith(testCtx(t), agentclient.InitRequest{Env: env, EnvScript: true}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(cfg.EnvScript)
		if err != nil || string(b) != envscript.Render(env) {
			t.Errorf("env script %q (%v), want %q", b, err, envscript.Render(env))
		}
	})
	t.Run("older agent", func(t *testing.T) {
		var mu sync.Mutex
		var got []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			got = append(got, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" "+string(b))
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(srv.Close)
		if err := agentclient.New(srv.URL, token, nil).InitWith(testCtx(t), agentclient.InitRequest{Env: env, EnvScript: true}); err != nil {
			t.Fatal(err)
		}
		want := []string{`POST /init? {"envScript":true,"envVars":{"A":"it's","B":"2"}}`,
			"POST /files?path=%2Fetc%2Fpt-env " + envscript.Render(env)}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("requests (-want +got):\n%s", d)
		}
	})
}
