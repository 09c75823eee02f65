package agent_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/platinum-dev/platinum/api/gen/filesystem/filesystemconnect"
	"github.com/platinum-dev/platinum/api/gen/process"
	"github.com/platinum-dev/platinum/api/gen/process/processconnect"
	"github.com/platinum-dev/platinum/internal/agent"
	"github.com/platinum-dev/platinum/internal/agent/agenttest"
)

const testToken = "test-token-123"

// env is one in-process agent on an httptest server speaking HTTP/1.1 and
// h2c, plus generated Connect clients that carry the token.
type env struct {
	srv  *agent.Server
	ts   *httptest.Server
	proc processconnect.ProcessClient
	fs   filesystemconnect.FilesystemClient
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWith is newEnv with the config adjusted by tune (nil: as is).
func newEnvWith(t *testing.T, tune func(*agent.Config)) *env {
	t.Helper()
	cfg := agent.DefaultConfig()
	cfg.Token = testToken
	cfg.DefaultUser = agenttest.CurrentUser(t)
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	if tune != nil {
		tune(&cfg)
	}
	srv, ts := agenttest.Serve(t, cfg)
	opts := connect.WithInterceptors(headerInterceptor{"X-Access-Token": testToken})
	return &env{
		srv:  srv,
		ts:   ts,
		proc: processconnect.NewProcessClient(ts.Client(), ts.URL, opts),
		fs:   filesystemconnect.NewFilesystemClient(ts.Client(), ts.URL, opts),
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// headerInterceptor sets fixed request headers on every RPC.
type headerInterceptor map[string]string

func (h headerInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		for k, v := range h {
			req.Header().Set(k, v)
		}
		return next(ctx, req)
	}
}

func (h headerInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		for k, v := range h {
			conn.RequestHeader().Set(k, v)
		}
		return conn
	}
}

func (h headerInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// rawJSON posts a unary Connect JSON request and returns status and body.
func (e *env) rawJSON(t *testing.T, path, body string, header map[string]string) (int, map[string]any) {
	t.Helper()
	resp := e.postConnect(t, path, "application/json", strings.NewReader(body), header)
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s: body %q is not JSON: %v", path, raw, err)
		}
	}
	return resp.StatusCode, out
}

// postConnect posts body by hand as a Connect request of contentType, with
// header on top, so that tests can send what the generated clients never
// would.
func (e *env) postConnect(t *testing.T, path, contentType string, body io.Reader, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.ts.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Connect-Protocol-Version", "1")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// do sends req to the agent as it is and returns the status and the whole
// body, failing the test only when the request does not get an answer.
func (e *env) do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// envelope is one frame of a Connect streaming body.
type envelope struct {
	flags byte
	data  string // compacted JSON
}

// rawStream posts a server-streaming Connect JSON request (one envelope)
// and returns every response envelope, JSON compacted (the encoder may
// insert spaces).
func (e *env) rawStream(t *testing.T, path, body string, header map[string]string) (int, []envelope) {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteByte(0)
	_ = binary.Write(&buf, binary.BigEndian, uint32(len(body)))
	buf.WriteString(body)
	resp := e.postConnect(t, path, "application/connect+json", &buf, header)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []envelope
	for len(raw) >= 5 {
		n := binary.BigEndian.Uint32(raw[1:5])
		if int(n) > len(raw)-5 {
			t.Fatalf("truncated envelope")
		}
		var c bytes.Buffer
		if err := json.Compact(&c, raw[5:5+n]); err != nil {
			t.Fatalf("envelope %q: %v", raw[5:5+n], err)
		}
		out = append(out, envelope{raw[0], c.String()})
		raw = raw[5+n:]
	}
	if len(raw) != 0 {
		t.Fatalf("trailing %d bytes", len(raw))
	}
	return resp.StatusCode, out
}

// events collects a process stream until it ends.
type events struct {
	pid    uint32
	stdout bytes.Buffer
	stderr bytes.Buffer
	pty    bytes.Buffer
	end    *process.ProcessEvent_EndEvent
	kinds  []string
}

func (ev *events) add(e *process.ProcessEvent) {
	switch {
	case e.GetStart() != nil:
		ev.kinds = append(ev.kinds, "start")
		ev.pid = e.GetStart().GetPid()
	case e.GetData() != nil:
		ev.kinds = append(ev.kinds, "data")
		ev.stdout.Write(e.GetData().GetStdout())
		ev.stderr.Write(e.GetData().GetStderr())
		ev.pty.Write(e.GetData().GetPty())
	case e.GetEnd() != nil:
		ev.kinds = append(ev.kinds, "end")
		ev.end = e.GetEnd()
	case e.GetKeepalive() != nil:
		ev.kinds = append(ev.kinds, "keepalive")
	}
}

// startUntil starts req and collects its events until ready says the
// output so far shows the process is up (a marker it prints once it is
// set up for what the test sends next). The stream stays open for the
// rest of the events; sel names the process for the RPCs that follow.
func (e *env) startUntil(ctx context.Context, t *testing.T, req *process.StartRequest, ready func(*events) bool) (stream *connect.ServerStreamForClient[process.StartResponse], ev *events, sel *process.ProcessSelector) {
	t.Helper()
	stream, err := e.proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	ev = &events{}
	for stream.Receive() {
		ev.add(stream.Msg().GetEvent())
		if ready(ev) {
			break
		}
	}
	return stream, ev, &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: ev.pid}}
}

// printed is a startUntil readiness test: marker is on stdout.
func printed(marker string) func(*events) bool {
	return func(ev *events) bool { return strings.Contains(ev.stdout.String(), marker) }
}

// startAndCollect runs a StartRequest to completion with the generated client.
func (e *env) startAndCollect(ctx context.Context, t *testing.T, req *process.StartRequest) (*events, error) {
	t.Helper()
	return e.collect(ctx, t, connect.NewRequest(req))
}

// collect is startAndCollect for a request that carries headers of its own.
func (e *env) collect(ctx context.Context, t *testing.T, req *connect.Request[process.StartRequest]) (*events, error) {
	t.Helper()
	stream, err := e.proc.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	ev := &events{}
	return ev, readEvents(ev, stream)
}

// readEvents adds the rest of a Start or Connect stream's events to ev
// and returns the stream's error: the end of most process tests.
func readEvents[R any, M interface {
	*R
	GetEvent() *process.ProcessEvent
}](ev *events, stream *connect.ServerStreamForClient[R]) error {
	for stream.Receive() {
		ev.add(M(stream.Msg()).GetEvent())
	}
	return stream.Err()
}

// startEvent reads a stream's first event, which must be the start, and
// returns it.
func startEvent(t *testing.T, stream *connect.ServerStreamForClient[process.StartResponse]) *process.ProcessEvent_StartEvent {
	t.Helper()
	if !stream.Receive() {
		t.Fatal(stream.Err())
	}
	return stream.Msg().GetEvent().GetStart()
}

// startDetached starts req, reads its start event and drops the stream:
// the process keeps running, as after a client that went away. It returns
// the process's pid.
func (e *env) startDetached(ctx context.Context, t *testing.T, req *process.StartRequest) uint32 {
	t.Helper()
	sctx, cancel := context.WithCancel(ctx)
	stream, err := e.proc.Start(sctx, connect.NewRequest(req))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pid := startEvent(t, stream).GetPid()
	cancel()
	stream.Close()
	return pid
}

func shell(script string) *process.ProcessConfig {
	return &process.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", script}}
}

func ptr[T any](v T) *T { return &v }
