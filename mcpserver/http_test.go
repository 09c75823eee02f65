package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func inproc(h http.Handler) *http.Client {
	return &http.Client{Transport: handlerTransport{h: h, log: slog.New(slog.DiscardHandler)}}
}

// TestHandlerTransportStreams: the response reaches the client while the
// handler is still writing, with the header as it was at WriteHeader.
func TestHandlerTransportStreams(t *testing.T) {
	next := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/x" || r.URL.RawQuery != "a=1" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "wrong request "+r.URL.String(), 400)
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen", string(b))
		w.WriteHeader(201)
		w.Header().Set("X-Late", "ignored")
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		<-next
		io.WriteString(w, "second\n")
	})
	req, _ := http.NewRequest("POST", "http://x/v1/x?a=1", strings.NewReader("body"))
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := inproc(h).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 201 || resp.Header.Get("X-Seen") != "body" || resp.Header.Get("X-Late") != "" {
		t.Fatalf("status %d header %v", resp.StatusCode, resp.Header)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first\n" {
		t.Fatalf("first chunk %q, %v", buf, err)
	}
	close(next) // the handler was blocked: the first chunk streamed
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "second\n" {
		t.Errorf("rest %q", rest)
	}
}

// TestHandlerTransportCancels: cancelling the request, or closing the
// body early, ends the handler's request context.
func TestHandlerTransportCancels(t *testing.T) {
	for _, how := range []string{"cancel before answer", "cancel while streaming", "close body"} {
		t.Run(how, func(t *testing.T) {
			ended := make(chan struct{})
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if how != "cancel before answer" {
					w.WriteHeader(200)
				}
				<-r.Context().Done()
				close(ended)
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://x/", nil)
			errc := make(chan error, 1)
			go func() {
				resp, err := inproc(h).Do(req)
				if err == nil {
					if how == "close body" {
						resp.Body.Close()
					} else {
						cancel()
						_, err = io.ReadAll(resp.Body)
					}
				}
				errc <- err
			}()
			if how == "cancel before answer" {
				time.Sleep(10 * time.Millisecond)
				cancel()
			}
			select {
			case <-ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the handler's context did not end")
			}
			if err := <-errc; how != "close body" && !errors.Is(err, context.Canceled) {
				t.Errorf("client error %v, want context.Canceled", err)
			}
		})
	}
}

func TestHandlerTransportPanic(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom") })
	resp, err := inproc(h).Get("http://x/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Errorf("status %d, want 500", resp.StatusCode)
	}
}

// fakeAPI answers GET /v1/sandboxes/{id} for the tokens it knows and
// records which token each call carried.
type fakeAPI struct {
	mu     sync.Mutex
	tokens []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok := bearer(r)
	f.mu.Lock()
	f.tokens = append(f.tokens, tok)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	id := strings.TrimPrefix(r.URL.Path, "/v1/sandboxes/")
	if r.Method != "GET" || id != "sbx_"+tok {
		w.WriteHeader(404)
		fmt.Fprintf(w, `{"error":"no sandbox %s","code":"not_found"}`, id)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"id": id, "state": "running", "template": "busybox"})
}

// TestHTTPHandler: /mcp refuses requests without a valid token in /v1's
// error shape, and each session's tool calls carry its own caller's token.
func TestHTTPHandler(t *testing.T) {
	api := &fakeAPI{}
	h := NewHTTPHandler(HTTPOptions{API: api, Authenticate: func(_ context.Context, tok string) (string, error) {
		if tok != "alice" && tok != "bob" {
			return "", fmt.Errorf("%w: unknown token", ErrUnauthenticated)
		}
		return "id-" + tok, nil
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Shutdown()

	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(b), `"code":"unauthorized"`) {
		t.Errorf("no token: %d %s", resp.StatusCode, b)
	}

	for _, who := range []string{"alice", "bob"} {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: tokenRT(who)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_sandbox", Arguments: map[string]any{"sandbox_id": "sbx_" + who}})
		if err != nil || res.IsError {
			t.Fatalf("%s: get own sandbox: %+v, %v", who, res, err)
		}
		// Concurrent calls on one session each get their own answer.
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				id := "sbx_" + who
				if i%2 == 1 {
					id = "sbx_nobody"
				}
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_sandbox", Arguments: map[string]any{"sandbox_id": id}})
				if err != nil || res.IsError != (i%2 == 1) {
					t.Errorf("%s: concurrent get %s: %+v, %v", who, id, res, err)
				}
			})
		}
		wg.Wait()
		other := map[string]string{"alice": "bob", "bob": "alice"}[who]
		res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_sandbox", Arguments: map[string]any{"sandbox_id": "sbx_" + other}})
		if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "[not_found]") {
			t.Errorf("%s: get %s's sandbox: %+v, %v", who, other, res, err)
		}
		cs.Close()
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	want := strings.Repeat("alice,", 10) + strings.TrimSuffix(strings.Repeat("bob,", 10), ",")
	if got := strings.Join(api.tokens, ","); got != want {
		t.Errorf("/v1 saw tokens %s, want %s", got, want)
	}
}

type tokenRT string

func (t tokenRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(t))
	return http.DefaultTransport.RoundTrip(r)
}

// blockingAPI holds every request until its context ends (reported on
// ended) or release is closed (when the test is over).
type blockingAPI struct {
	started, ended chan string
	release        chan struct{}
}

func (b blockingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case b.started <- r.Method + " " + r.URL.Path:
	case <-b.release:
	}
	select {
	case <-r.Context().Done():
		b.ended <- r.Method + " " + r.URL.Path
	case <-b.release:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict) // not retried
		io.WriteString(w, `{"error":"test over","code":"conflict"}`)
	}
}

// TestHTTPCancelEndsAPICall: on /mcp, cancelling a snapshot_sandbox or
// fork_sandbox call ends the /v1 request it is waiting on (through the
// Streamable HTTP transport and the in-process one), and the call
// returns.
func TestHTTPCancelEndsAPICall(t *testing.T) {
	api := blockingAPI{started: make(chan string, 1), ended: make(chan string, 1), release: make(chan struct{})}
	h := NewHTTPHandler(HTTPOptions{API: api, Authenticate: func(_ context.Context, tok string) (string, error) { return tok, nil }})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Shutdown()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: tokenRT("alice")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	defer close(api.release) // first: a call still held (on failure) ends
	for tool, want := range map[string]string{
		"snapshot_sandbox": "POST /v1/sandboxes/sbx_1/snapshots",
		"fork_sandbox":     "POST /v1/sandboxes/sbx_1/fork",
	} {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"sandbox_id": "sbx_1"}})
			errc <- err
		}()
		if got := <-api.started; got != want {
			t.Fatalf("%s called %s, want %s", tool, got, want)
		}
		select {
		case got := <-api.ended:
			t.Fatalf("%s: %s ended before the cancel", tool, got)
		case <-time.After(100 * time.Millisecond):
		}
		cancel()
		select {
		case <-api.ended:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the /v1 request still runs 10 s after the cancel", tool)
		}
		if err := <-errc; err == nil {
			t.Errorf("%s: the cancelled call returned no error", tool)
		}
	}
}

// TestHandlerTransportPanics: a handler's panic ends the response and is
// logged, except http.ErrAbortHandler (a proxy giving up on a reader that
// left), which net/http's server does not log either.
func TestHandlerTransportPanics(t *testing.T) {
	for _, tc := range []struct {
		panic  any
		logged bool
	}{
		{http.ErrAbortHandler, false},
		{"boom", true},
	} {
		var logs bytes.Buffer
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "part")
			panic(tc.panic)
		})
		c := &http.Client{Transport: handlerTransport{h: h, log: slog.New(slog.NewTextHandler(&logs, nil))}}
		resp, err := c.Get("http://x/v1/x")
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Errorf("panic %v: the body ended cleanly, want an error", tc.panic)
		}
		if got := strings.Contains(logs.String(), "panicked"); got != tc.logged {
			t.Errorf("panic %v: logged %v, want %v (%s)", tc.panic, got, tc.logged, logs.String())
		}
	}
}
