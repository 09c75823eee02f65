package preview

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func TestSigner(t *testing.T) {
	s, err := NewSigner(testKey)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewSigner([]byte("ffffffffffffffffffffffffffffffff"))
	now := time.Unix(1_800_000_000, 0)
	id := sandbox.NewID(sandbox.PrefixSandbox)
	good := Claims{SandboxID: id, Port: 3000, Gen: 2, Expires: now.Add(time.Hour).UTC()}
	tok := s.Sign(good)
	tests := []struct {
		name string
		tok  string
		at   time.Time
		ok   bool
	}{
		{"valid", tok, now, true},
		{"no expiry", s.Sign(Claims{SandboxID: id, Port: 1}), now.Add(1000 * time.Hour), true},
		{"expired", tok, now.Add(time.Hour), false},
		{"other key", other.Sign(good), now, false},
		{"tampered payload", tokenPrefix + strings.Replace(strings.TrimPrefix(tok, tokenPrefix), "M", "N", 1), now, false},
		{"truncated", tok[:len(tok)-2], now, false},
		{"empty", "", now, false},
		{"garbage", "pv1.!!.!!", now, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := s.Verify(tt.tok, tt.at)
			if tt.ok != (err == nil) {
				t.Fatalf("Verify: %v, want ok=%v", err, tt.ok)
			}
			if !tt.ok && !errors.Is(err, ErrBadToken) {
				t.Errorf("error %v is not ErrBadToken", err)
			}
			if tt.name == "valid" {
				if d := cmp.Diff(good, c); d != "" {
					t.Errorf("claims (-want +got):\n%s", d)
				}
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	id := "sbx_01JABCDEFGHJKMNPQRSTVWXYZ0"
	label := Label(id, 3000)
	if label != "3000-sbx01jabcdefghjkmnpqrstvwxyz0" {
		t.Fatalf("Label = %q", label)
	}
	hosts := []struct {
		host string
		want target
		ok   bool
	}{
		{label + ".localhost:7071", target{SandboxID: id, Port: 3000}, true},
		{strings.ToUpper(label) + ".LOCALHOST", target{SandboxID: id, Port: 3000}, true},
		{label + ".preview.example.com", target{}, false}, // other domain
		{"localhost:7071", target{}, false},
		{"0-sbx01jabcdefghjkmnpqrstvwxyz0.localhost", target{}, false},
		{"65536-sbx01jabcdefghjkmnpqrstvwxyz0.localhost", target{}, false},
		{"3000-tpl01jabcdefghjkmnpqrstvwxyz0.localhost", target{}, false},
		{"3000-sbx01jabc.localhost", target{}, false},
		{"a.3000-sbx01jabcdefghjkmnpqrstvwxyz0.localhost", target{}, false},
	}
	for _, h := range hosts {
		got, ok := parseHost(h.host, "localhost")
		if ok != h.ok || got != h.want {
			t.Errorf("parseHost(%q) = %+v, %v; want %+v, %v", h.host, got, ok, h.want, h.ok)
		}
	}
	paths := []struct {
		path, fwd string
		ok        bool
	}{
		{"/" + id + "/3000/a/b?x", "/a/b?x", true},
		{"/" + id + "/3000/", "/", true},
		{"/" + id + "/3000", "/", true},
		{"/" + id + "/03000/", "", false},
		{"/" + id + "/x/", "", false},
		{"/sbx_nope/3000/", "", false},
		{"/", "", false},
	}
	for _, p := range paths {
		got, fwd, ok := parsePath(p.path)
		if ok != p.ok || fwd != p.fwd || (ok && (got.SandboxID != id || got.Port != 3000)) {
			t.Errorf("parsePath(%q) = %+v, %q, %v", p.path, got, fwd, ok)
		}
	}
}

// fakeBackend is a control plane with one sandbox whose state the test
// sets; AutoResume flips it to running after a delay.
type fakeBackend struct {
	mu       sync.Mutex
	sbs      map[string]sandbox.Sandbox
	resumes  atomic.Int32
	touches  atomic.Int32
	delay    time.Duration
	onResume func() // runs before the resume answers
}

func (f *fakeBackend) PreviewTarget(ctx context.Context, id string) (sandbox.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.sbs[id]
	if !ok {
		return sb, fmt.Errorf("sandbox %q: %w", id, sandbox.ErrNotFound)
	}
	return sb, nil
}

func (f *fakeBackend) AutoResume(ctx context.Context, id string, timeout time.Duration) (sandbox.Sandbox, error) {
	f.resumes.Add(1)
	sb, err := f.PreviewTarget(ctx, id)
	if err != nil {
		return sb, err
	}
	if sb.NoAutoResume {
		return sb, controlplane.ErrAutoResumeDisabled
	}
	time.Sleep(f.delay)
	if f.onResume != nil {
		f.onResume()
	}
	f.mu.Lock()
	sb.State = sandbox.StateRunning
	f.sbs[id] = sb
	f.mu.Unlock()
	return sb, nil
}

func (f *fakeBackend) Touch(id string) { f.touches.Add(1) }

func (f *fakeBackend) set(sb sandbox.Sandbox) {
	f.mu.Lock()
	f.sbs[sb.ID] = sb
	f.mu.Unlock()
}

// rig is a proxy in front of one upstream server standing in for a
// sandbox's port.
type rig struct {
	be       *fakeBackend
	srv      *Server
	issuer   *Issuer
	proxyURL string // http://127.0.0.1:port
	id       string
	port     int
	seen     chan *http.Request
}

func newRig(t *testing.T, upstream http.Handler) *rig {
	t.Helper()
	r := &rig{be: &fakeBackend{sbs: map[string]sandbox.Sandbox{}}, id: sandbox.NewID(sandbox.PrefixSandbox), seen: make(chan *http.Request, 100)}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case r.seen <- req.Clone(context.Background()):
		default:
		}
		upstream.ServeHTTP(w, req)
	}))
	t.Cleanup(up.Close)
	_, ps, _ := net.SplitHostPort(up.Listener.Addr().String())
	r.port, _ = strconv.Atoi(ps)
	r.be.set(sandbox.Sandbox{ID: r.id, State: sandbox.StateRunning, Address: "127.0.0.1"})
	signer, _ := NewSigner(testKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.URLPort = ln.Addr().(*net.TCPAddr).Port
	cfg.ResumeTimeout = 5 * time.Second
	cfg.ActivityInterval = 20 * time.Millisecond
	r.issuer = NewIssuer(cfg, signer)
	if r.srv, err = New(cfg, signer, r.be, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	r.proxyURL = "http://" + ln.Addr().String()
	return r
}

func (r *rig) token(gen int64, exp time.Time) string {
	return r.issuer.Issue(r.id, r.port, gen, exp).Token
}

func (r *rig) host() string { return Label(r.id, r.port) + ".localhost" }

// get sends a GET through the proxy by Host with extra headers.
func (r *rig) get(t *testing.T, path string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", r.proxyURL+path, nil)
	req.Host = r.host()
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func hello(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) }

func TestTokenCheck(t *testing.T) {
	r := newRig(t, http.HandlerFunc(hello))
	now := time.Now()
	good := r.token(0, time.Time{})
	// A request for a sandbox that does not exist, with a token that is
	// well signed for it: the answer every failure must match.
	ghost := sandbox.NewID(sandbox.PrefixSandbox)
	req, _ := http.NewRequest("GET", r.proxyURL+"/", nil)
	req.Host = Label(ghost, r.port) + ".localhost"
	req.Header.Set(HeaderToken, r.issuer.Issue(ghost, r.port, 0, time.Time{}).Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	wantBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unknown sandbox: %d %s", resp.StatusCode, wantBody)
	}
	wantHdr := headerShape(resp.Header)

	r.be.set(sandbox.Sandbox{ID: r.id, State: sandbox.StateStopped, Address: "127.0.0.1", Preview: &sandbox.Preview{Gen: map[int]int64{r.port: 1}}})
	bad := map[string]string{
		"missing":         "",
		"garbage":         "nope",
		"expired":         r.token(1, now.Add(-time.Second)),
		"revoked":         r.token(0, time.Time{}), // generation 0 < 1
		"other port":      r.issuer.Issue(r.id, r.port+1, 1, time.Time{}).Token,
		"other sandbox":   r.issuer.Issue(ghost, r.port, 1, time.Time{}).Token,
		"other key":       mustSigner(t, "ffffffffffffffffffffffffffffffff").Sign(Claims{SandboxID: r.id, Port: r.port, Gen: 1}),
		"query, bad":      "",
		"cookie, revoked": "",
	}
	for name, tok := range bad {
		t.Run(name, func(t *testing.T) {
			hdr := map[string]string{}
			path := "/"
			switch name {
			case "missing":
			case "query, bad":
				path = "/?pt_token=nope"
			case "cookie, revoked":
				hdr["Cookie"] = CookieToken + "=" + good
			default:
				hdr[HeaderToken] = tok
			}
			resp, body := r.get(t, path, hdr)
			if resp.StatusCode != http.StatusUnauthorized || body != string(wantBody) {
				t.Errorf("%d %s; want 401 %s", resp.StatusCode, body, wantBody)
			}
			if d := cmp.Diff(wantHdr, headerShape(resp.Header)); d != "" {
				t.Errorf("headers differ from an unknown sandbox's (-want +got):\n%s", d)
			}
		})
	}
	if n := r.be.resumes.Load(); n != 0 {
		t.Errorf("failed checks started the sandbox %d times", n)
	}

	// The current generation's token passes and resumes the sandbox.
	resp, body := r.get(t, "/x", map[string]string{HeaderToken: r.token(1, now.Add(time.Minute))})
	if resp.StatusCode != 200 || body != "hello /x" {
		t.Fatalf("good token: %d %s", resp.StatusCode, body)
	}
	if up := <-r.seen; up.Header.Get(HeaderToken) != "" {
		t.Errorf("the sandbox saw the preview token")
	}
}

// headerShape is a response's headers without the ones that vary per
// response.
func headerShape(h http.Header) http.Header {
	h = h.Clone()
	h.Del("Date")
	return h
}

func mustSigner(t *testing.T, key string) *Signer {
	s, err := NewSigner([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestQueryTokenBecomesCookie(t *testing.T) {
	r := newRig(t, http.HandlerFunc(hello))
	tok := r.token(0, time.Time{})
	resp, _ := r.get(t, "/page?a=1&pt_token="+tok, nil)
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "/page?a=1" {
		t.Fatalf("query token: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == CookieToken {
			cookie = c
		}
	}
	if cookie == nil || cookie.Value != tok || !cookie.HttpOnly || cookie.Path != "/" {
		t.Fatalf("cookie: %+v", cookie)
	}
	resp, body := r.get(t, "/page?a=1", map[string]string{"Cookie": "app=1; " + CookieToken + "=" + tok})
	if resp.StatusCode != 200 || body != "hello /page" {
		t.Fatalf("with cookie: %d %s", resp.StatusCode, body)
	}
	if up := <-r.seen; up.Header.Get("Cookie") != "app=1" {
		t.Errorf("the sandbox saw Cookie %q, want only the app's", up.Header.Get("Cookie"))
	}

	// Path form: the cookie is scoped to the sandbox's port.
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/%s/%d/p?pt_token=%s", r.proxyURL, r.id, r.port, tok), nil)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); loc != fmt.Sprintf("/%s/%d/p", r.id, r.port) {
		t.Errorf("path form Location %q", loc)
	}
	if cs := resp.Cookies(); len(cs) != 1 || cs[0].Path != fmt.Sprintf("/%s/%d/", r.id, r.port) {
		t.Errorf("path form cookie: %+v", cs)
	}
}

func TestPathFormAndPublicPort(t *testing.T) {
	r := newRig(t, http.HandlerFunc(hello))
	url := fmt.Sprintf("%s/%s/%d/a/b?q=1", r.proxyURL, r.id, r.port)
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("private port without token: %d", resp.StatusCode)
	}
	r.be.set(sandbox.Sandbox{ID: r.id, State: sandbox.StateRunning, Address: "127.0.0.1", Preview: &sandbox.Preview{Public: []int{r.port}}})
	resp, err = http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hello /a/b" {
		t.Fatalf("public port: %d %s", resp.StatusCode, b)
	}
	if up := <-r.seen; up.URL.RawQuery != "q=1" || up.Header.Get("X-Forwarded-Host") == "" {
		t.Errorf("upstream saw query %q, X-Forwarded-Host %q", up.URL.RawQuery, up.Header.Get("X-Forwarded-Host"))
	}
	if r.be.touches.Load() == 0 {
		t.Errorf("proxied traffic did not count as activity")
	}
}

func TestAutoResumeOnce(t *testing.T) {
	r := newRig(t, http.HandlerFunc(hello))
	r.be.delay = 200 * time.Millisecond
	r.be.set(sandbox.Sandbox{ID: r.id, State: sandbox.StateStopped, Address: "127.0.0.1"})
	tok := r.token(0, time.Time{})
	var wg sync.WaitGroup
	errs := make(chan string, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", r.proxyURL+"/r", nil)
			req.Host = r.host()
			req.Header.Set(HeaderToken, tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "hello /r" {
				errs <- fmt.Sprintf("%d %s", resp.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := r.be.resumes.Load(); n != 1 {
		t.Errorf("20 concurrent requests resumed %d times, want 1", n)
	}
}

func TestAutoResumeDisabled(t *testing.T) {
	r := newRig(t, http.HandlerFunc(hello))
	r.be.set(sandbox.Sandbox{ID: r.id, State: sandbox.StateStopped, Address: "127.0.0.1", NoAutoResume: true})
	resp, body := r.get(t, "/", map[string]string{HeaderToken: r.token(0, time.Time{})})
	if resp.StatusCode != 404 || resp.Header.Get(HeaderReason) != ReasonAutoResumeDisabled || !strings.Contains(body, `"reason":"auto-resume-disabled"`) {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
}

func TestStreamingAndH2C(t *testing.T) {
	release := make(chan struct{})
	r := newRig(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "second\n")
	}))
	tok := r.token(0, time.Time{})
	h2 := &http.Transport{Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	for _, tc := range []struct {
		name  string
		rt    http.RoundTripper
		proto int
	}{{"http1", http.DefaultTransport, 1}, {"h2c", h2, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", r.proxyURL+"/", nil)
			req.Host = r.host()
			req.Header.Set(HeaderToken, tok)
			resp, err := tc.rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.ProtoMajor != tc.proto {
				t.Errorf("proto %s", resp.Proto)
			}
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			// The first line arrives while the upstream still holds the
			// rest back: nothing is buffered.
			if err != nil || line != "first\n" {
				t.Fatalf("first line %q, %v", line, err)
			}
			release <- struct{}{}
		})
	}
}

func TestUpgradePassesThrough(t *testing.T) {
	r := newRig(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want upgrade", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		io.Copy(conn, brw)
	}))
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.proxyURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\n%s: %s\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n", r.host(), HeaderToken, r.token(0, time.Time{}))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	for i := range 3 {
		msg := fmt.Sprintf("ping %d\n", i)
		io.WriteString(conn, msg)
		got, err := br.ReadString('\n')
		if err != nil || got != msg {
			t.Fatalf("echo %q, %v", got, err)
		}
	}
	// While the connection stays open the sandbox keeps being marked
	// active, so auto-stop cannot cut it.
	before := r.be.touches.Load()
	for deadline := time.Now().Add(10 * time.Second); r.be.touches.Load() < before+3; {
		if time.Now().After(deadline) {
			t.Fatalf("an open upgraded connection was not counted as activity (%d touches)", r.be.touches.Load()-before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGRPCOverH2C: a gRPC-shaped call (HTTP/2, application/grpc, a
// trailer) goes to the sandbox over h2c and its trailer comes back.
func TestGRPCOverH2C(t *testing.T) {
	r := &rig{be: &fakeBackend{sbs: map[string]sandbox.Sandbox{}}, id: sandbox.NewID(sandbox.PrefixSandbox), seen: make(chan *http.Request, 10)}
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		fmt.Fprintf(w, "HTTP/%d got %s", req.ProtoMajor, b)
		w.Header().Set("Grpc-Status", "0")
	}))
	up.Config.Protocols = new(http.Protocols)
	up.Config.Protocols.SetHTTP1(true)
	up.Config.Protocols.SetUnencryptedHTTP2(true)
	up.Start()
	t.Cleanup(up.Close)
	r.port = up.Listener.Addr().(*net.TCPAddr).Port
	r.be.set(sandbox.Sandbox{ID: r.id, State: sandbox.StateRunning, Address: "127.0.0.1", Preview: &sandbox.Preview{Public: []int{r.port}}})
	signer, _ := NewSigner(testKey)
	srv, err := New(DefaultConfig(), signer, r.be, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })

	h2 := &http.Transport{Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	for _, tc := range []struct {
		ctype, want string
	}{{"application/grpc", "HTTP/2 got ping"}, {"text/plain", "HTTP/1 got ping"}} {
		req, _ := http.NewRequest("POST", fmt.Sprintf("http://%s/%s/%d/svc/Method", ln.Addr(), r.id, r.port), strings.NewReader("ping"))
		req.Header.Set("Content-Type", tc.ctype)
		req.Header.Set("TE", "trailers")
		resp, err := h2.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != tc.want {
			t.Errorf("%s: body %q, want %q", tc.ctype, b, tc.want)
		}
		if tc.ctype == "application/grpc" && resp.Trailer.Get("Grpc-Status") != "0" {
			t.Errorf("trailer Grpc-Status = %q", resp.Trailer.Get("Grpc-Status"))
		}
	}
}

// TestConnectionsPerBoot: the proxy keeps connections to a sandbox's
// port between requests, but not across its boots. A sandbox started
// again (or another sandbox given the same address) resets a connection
// kept from before, and a POST sent on it would fail with 502.
func TestConnectionsPerBoot(t *testing.T) {
	r := newRig(t, http.HandlerFunc(hello))
	sb := sandbox.Sandbox{ID: r.id, State: sandbox.StateRunning, Address: "127.0.0.1", Preview: &sandbox.Preview{Public: []int{r.port}}}
	r.be.set(sb)
	post := func() string {
		t.Helper()
		resp, err := http.Post(fmt.Sprintf("%s/%s/%d/x", r.proxyURL, r.id, r.port), "text/plain", strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST: %d", resp.StatusCode)
		}
		return (<-r.seen).RemoteAddr
	}
	first := post()
	if again := post(); again != first {
		t.Fatalf("a second request in the same boot dialled again (%s, then %s)", first, again)
	}
	sb.LastStart = &sandbox.LastStart{At: time.Now()}
	r.be.set(sb)
	if after := post(); after == first {
		t.Fatalf("a request after the sandbox started again reused connection %s from its previous boot", first)
	}
}

// fakePeers relays the sandboxes it holds, answering 299 itself.
type fakePeers struct {
	ids  map[string]bool
	seen atomic.Int32
}

func (p *fakePeers) Relay(w http.ResponseWriter, r *http.Request, id, mark string) bool {
	if !p.ids[id] || mark != HeaderRelay {
		return false
	}
	p.seen.Add(1)
	w.WriteHeader(299)
	return true
}

// TestPeersTakeOtherHostsSandboxes: with peers set, a request for a
// sandbox another host runs goes to them before anything happens here
// (the token is checked by the proxy of that host, which signed it),
// in the host and the path forms; this host's sandboxes are served here
// as before, token checked.
func TestPeersTakeOtherHostsSandboxes(t *testing.T) {
	r := newRig(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "local") }))
	other := sandbox.NewID(sandbox.PrefixSandbox)
	peers := &fakePeers{ids: map[string]bool{other: true}}
	r.srv.SetPeers(peers)

	req, _ := http.NewRequest("GET", r.proxyURL+"/x", nil)
	req.Host = Label(other, 3000) + ".localhost"
	if resp, err := noRedirect.Do(req); err != nil || resp.StatusCode != 299 {
		t.Fatalf("host form, another host's sandbox: %v %v", resp, err)
	}
	if resp, err := noRedirect.Get(r.proxyURL + "/" + other + "/3000/x"); err != nil || resp.StatusCode != 299 {
		t.Fatalf("path form, another host's sandbox: %v %v", resp, err)
	}
	if resp, body := r.get(t, "/", map[string]string{HeaderToken: r.token(0, time.Time{})}); resp.StatusCode != 200 || body != "local" {
		t.Fatalf("own sandbox: %d %q", resp.StatusCode, body)
	}
	if resp, _ := r.get(t, "/", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("own sandbox without a token: %d", resp.StatusCode)
	}
	if n := peers.seen.Load(); n != 2 {
		t.Fatalf("peers took %d requests, want 2", n)
	}
}
