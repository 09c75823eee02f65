package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/platinum-dev/platinum/internal/metrics/metricstest"
)

func TestMatchAny(t *testing.T) {
	for _, tc := range []struct {
		patterns []string
		name     string
		want     bool
	}{
		{[]string{"api.example.com"}, "api.example.com", true},
		{[]string{"api.example.com"}, "API.Example.com.", true},
		{[]string{"api.example.com"}, "x.api.example.com", false},
		{[]string{"*.example.com"}, "api.example.com", true},
		{[]string{"*.example.com"}, "a.b.example.com", true},
		{[]string{"*.example.com"}, "example.com", false},
		{[]string{"*.example.com"}, "badexample.com", false},
		{nil, "example.com", false},
	} {
		if got := MatchAny(tc.patterns, tc.name); got != tc.want {
			t.Errorf("MatchAny(%v, %q) = %v, want %v", tc.patterns, tc.name, got, tc.want)
		}
	}
}

func TestAllowIP(t *testing.T) {
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name  string
		rules Rules
		addr  string
		want  bool
	}{
		{"default allows", Rules{}, "198.51.100.1", true},
		{"deny blocks", Rules{Deny: true}, "198.51.100.1", false},
		{"deny_out blocks", Rules{DenyCIDRs: []netip.Prefix{p("198.51.100.0/24")}}, "198.51.100.1", false},
		{"deny_out elsewhere", Rules{DenyCIDRs: []netip.Prefix{p("198.51.100.0/24")}}, "203.0.113.1", true},
		{"allow_out wins", Rules{AllowCIDRs: []netip.Prefix{p("198.51.100.1/32")}, DenyCIDRs: []netip.Prefix{p("198.51.100.0/24")}}, "198.51.100.1", true},
		{"allow_out under deny", Rules{Deny: true, AllowCIDRs: []netip.Prefix{p("198.51.100.0/24")}}, "198.51.100.9", true},
		{"deny outside allow_out", Rules{Deny: true, AllowCIDRs: []netip.Prefix{p("198.51.100.0/24")}}, "203.0.113.1", false},
	} {
		if got := tc.rules.allowIP(a(tc.addr)); got != tc.want {
			t.Errorf("%s: allowIP(%s) = %v, want %v", tc.name, tc.addr, got, tc.want)
		}
	}
}

// rig is a proxy on loopback whose "original destination" is whatever
// the test says, an upstream HTTPS and HTTP server, and the CAs.
type rig struct {
	p        *Proxy
	sbxCA    *CA // the sandbox's CA (what the proxy signs with)
	upCA     *CA // the test's upstream root
	tlsUp    net.Listener
	httpUp   net.Listener
	hosts    string
	mu       sync.Mutex
	dst      netip.AddrPort
	seen     []*http.Request
	seenBody []string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{}
	var err error
	if r.sbxCA, _, err = NewCA("sandbox"); err != nil {
		t.Fatal(err)
	}
	if r.upCA, _, err = NewCA("upstream"); err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.seen = append(r.seen, req)
		r.seenBody = append(r.seenBody, string(b))
		r.mu.Unlock()
		w.Header().Set("X-Echo", req.Header.Get("Authorization"))
		if req.URL.Path == "/echo" {
			// A server that reflects what it got, split over writes.
			a := req.Header.Get("Authorization")
			io.WriteString(w, "you sent: "+a[:len(a)/2])
			w.(http.Flusher).Flush()
			io.WriteString(w, a[len(a)/2:]+" and "+string(b))
			return
		}
		io.WriteString(w, "hello from "+req.Host)
	})
	r.tlsUp, err = tls.Listen("tcp4", "127.0.0.1:0", &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return r.upCA.Leaf(hi.ServerName)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r.httpUp, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	for _, ln := range []net.Listener{r.tlsUp, r.httpUp} {
		srv := &http.Server{Handler: h}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	r.hosts = filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(r.hosts, []byte("127.0.0.1 api.test other.test x.allowed.test\n"), 0o644)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(r.upCA.CertPEM)
	r.p = New(Config{
		Listen:        netip.MustParseAddrPort("127.0.0.1:0"),
		DNSListen:     netip.MustParseAddrPort("127.0.0.1:0"),
		UpstreamRoots: roots,
		Resolver:      &Resolver{HostsFile: r.hosts, NoSystem: true},
		OriginalDst: func(net.Conn) (netip.AddrPort, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.dst, nil
		},
	}, nil)
	if err := r.p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.p.Close() })
	return r
}

func (r *rig) to(ln net.Listener) {
	r.mu.Lock()
	r.dst = netip.MustParseAddrPort(ln.Addr().String())
	r.mu.Unlock()
}

// client is what a sandbox process would be: it trusts the sandbox CA and
// the real upstream root, and every connection lands on the proxy.
func (r *rig) client() *http.Client {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(r.sbxCA.CertPEM)
	roots.AppendCertsFromPEM(r.upCA.CertPEM)
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp4", r.p.Addr().String())
		},
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DisableKeepAlives: true,
	}}
}

func (r *rig) last() (*http.Request, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		return nil, ""
	}
	return r.seen[len(r.seen)-1], r.seenBody[len(r.seenBody)-1]
}

func get(t *testing.T, c *http.Client, method, url, auth, body string) (*http.Response, string, error) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+auth)
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), nil
}

const (
	placeholder = "pt_secret_0123456789abcdef"
	value       = "sk-live-very-secret"
)

func TestSecretInjection(t *testing.T) {
	r := newRig(t)
	loop := netip.MustParseAddr("127.0.0.1")
	r.p.Set(loop, &Rules{CA: r.sbxCA, Secrets: []Secret{{Placeholder: placeholder, Value: value, Hosts: []string{"api.test"}, Body: true}}})
	c := r.client()

	t.Run("https bound host gets the value", func(t *testing.T) {
		r.to(r.tlsUp)
		resp, body, err := get(t, c, "POST", "https://api.test/v1?key="+placeholder, placeholder, `{"k":"`+placeholder+`"}`)
		if err != nil {
			t.Fatal(err)
		}
		req, gotBody := r.last()
		if got := req.Header.Get("Authorization"); got != "Bearer "+value {
			t.Errorf("upstream Authorization = %q, want the value", got)
		}
		if got := req.URL.Query().Get("key"); got != value {
			t.Errorf("upstream query key = %q, want the value", got)
		}
		if gotBody != `{"k":"`+value+`"}` {
			t.Errorf("upstream body = %q, want the value in it", gotBody)
		}
		if echo := resp.Header.Get("X-Echo"); strings.Contains(echo, value) || echo != "Bearer "+placeholder {
			t.Errorf("response header echoes %q to the sandbox, want the placeholder", echo)
		}
		if body != "hello from api.test" {
			t.Errorf("body %q", body)
		}
		// The sandbox saw a certificate from its own CA.
		if resp.TLS == nil || resp.TLS.PeerCertificates[0].Issuer.CommonName != "Platinum egress CA sandbox" {
			t.Errorf("sandbox saw issuer %v, want its egress CA", resp.TLS.PeerCertificates[0].Issuer)
		}
	})
	t.Run("values echoed in a response go back as placeholders", func(t *testing.T) {
		r.to(r.tlsUp)
		_, body, err := get(t, c, "POST", "https://api.test/echo", placeholder, "x"+placeholder+"y")
		if err != nil {
			t.Fatal(err)
		}
		if want := "you sent: Bearer " + placeholder + " and x" + placeholder + "y"; body != want {
			t.Errorf("sandbox got %q, want %q", body, want)
		}
		if _, got := r.last(); got != "x"+value+"y" {
			t.Errorf("upstream got body %q", got)
		}
	})
	t.Run("expect 100-continue", func(t *testing.T) {
		r.to(r.tlsUp)
		req, _ := http.NewRequest("POST", "https://api.test/", strings.NewReader(placeholder))
		req.Header.Set("Expect", "100-continue")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if _, got := r.last(); resp.StatusCode != 200 || got != value {
			t.Errorf("status %d, upstream body %q", resp.StatusCode, got)
		}
	})
	t.Run("https unbound host gets the placeholder, end to end TLS", func(t *testing.T) {
		r.to(r.tlsUp)
		resp, _, err := get(t, c, "POST", "https://other.test/", placeholder, placeholder)
		if err != nil {
			t.Fatal(err)
		}
		req, gotBody := r.last()
		if got := req.Header.Get("Authorization"); got != "Bearer "+placeholder {
			t.Errorf("unbound host got Authorization %q, want the placeholder", got)
		}
		if gotBody != placeholder {
			t.Errorf("unbound host got body %q", gotBody)
		}
		if iss := resp.TLS.PeerCertificates[0].Issuer.CommonName; iss != "Platinum egress CA upstream" {
			t.Errorf("unbound host's TLS was terminated (issuer %q)", iss)
		}
	})
	t.Run("http bound host that resolves there", func(t *testing.T) {
		r.to(r.httpUp)
		_, port, _ := net.SplitHostPort(r.httpUp.Addr().String())
		if _, _, err := get(t, c, "GET", "http://api.test:"+port+"/", placeholder, ""); err != nil {
			t.Fatal(err)
		}
		req, _ := r.last()
		if got := req.Header.Get("Authorization"); got != "Bearer "+value {
			t.Errorf("http upstream Authorization = %q", got)
		}
	})
	t.Run("upstream certificate is verified", func(t *testing.T) {
		bad, _, _ := NewCA("impostor")
		ln, err := tls.Listen("tcp4", "127.0.0.1:0", &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return bad.Leaf(hi.ServerName)
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go serveConns(ln, func(c net.Conn) { c.(*tls.Conn).Handshake(); io.Copy(io.Discard, c) })
		r.to(ln)
		resp, _, err := get(t, c, "GET", "https://api.test/", placeholder, "")
		if err == nil && resp.StatusCode == 200 {
			t.Fatalf("request through an impostor upstream succeeded")
		}
	})
}

func TestScrubReader(t *testing.T) {
	secrets := []Secret{{Value: "SECRET-VALUE", Placeholder: "pt_secret_1"}, {Value: "xy", Placeholder: "pt_secret_2"}}
	for _, in := range []string{
		"",
		"nothing here",
		"SECRET-VALUE",
		"a SECRET-VALUE b SECRET-VALUExy SECRET-VALU",
		strings.Repeat("z", 70000) + "SECRET-VALUE" + strings.Repeat("x", 5) + "y",
	} {
		want := strings.NewReplacer("SECRET-VALUE", "pt_secret_1", "xy", "pt_secret_2").Replace(in)
		for _, oneByte := range []bool{false, true} {
			var src io.Reader = strings.NewReader(in)
			if oneByte {
				src = iotest.OneByteReader(src)
			}
			resp := &http.Response{Body: io.NopCloser(src), Header: http.Header{}}
			scrubBody(resp, secrets)
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Errorf("scrub(%.40q, one byte reads %v) = %.60q, want %.60q", in, oneByte, got, want)
			}
		}
	}
}

func TestDomainRules(t *testing.T) {
	r := newRig(t)
	r.p.Set(netip.MustParseAddr("127.0.0.1"), &Rules{Deny: true, AllowDomains: []string{"*.allowed.test"}})
	c := r.client()
	r.to(r.tlsUp)
	if _, body, err := get(t, c, "GET", "https://x.allowed.test/", "", ""); err != nil || body != "hello from x.allowed.test" {
		t.Errorf("allowed SNI: %q %v", body, err)
	}
	for _, url := range []string{"https://other.test/", "https://api.test/"} {
		if _, _, err := get(t, c, "GET", url, "", ""); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s: err %v, want a connection reset", url, err)
		}
	}
	r.to(r.httpUp)
	_, port, _ := net.SplitHostPort(r.httpUp.Addr().String())
	if _, body, err := get(t, c, "GET", "http://x.allowed.test:"+port+"/", "", ""); err != nil || body != "hello from x.allowed.test:"+port {
		t.Errorf("allowed Host: %q %v", body, err)
	}
	if _, _, err := get(t, c, "GET", "http://other.test:"+port+"/", "", ""); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("blocked Host: err %v, want a connection reset", err)
	}
	// An allowed name at an address it does not resolve to is refused.
	os.WriteFile(r.hosts, []byte("127.0.0.2 x.allowed.test\n"), 0o644)
	if _, _, err := get(t, c, "GET", "http://x.allowed.test:"+port+"/", "", ""); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("allowed name at a foreign address: err %v, want a connection reset", err)
	}
}

func TestUnknownSourceIsReset(t *testing.T) {
	r := newRig(t)
	r.to(r.httpUp)
	if _, _, err := get(t, r.client(), "GET", "http://api.test/", "", ""); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("err %v, want a connection reset for a source with no rules", err)
	}
}

func TestDNSFilter(t *testing.T) {
	r := newRig(t)
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, r.p.DNSAddr().String())
	}}
	r.p.Set(netip.MustParseAddr("127.0.0.1"), &Rules{Deny: true, AllowDomains: []string{"*.allowed.test"}})
	got, err := res.LookupHost(context.Background(), "x.allowed.test")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"127.0.0.1"}, got); diff != "" {
		t.Errorf("allowed name (-want +got):\n%s", diff)
	}
	_, err = res.LookupHost(context.Background(), "api.test")
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound {
		t.Errorf("denied name: %v, want not found", err)
	}
	// Egress allowed: every name resolves.
	r.p.Set(netip.MustParseAddr("127.0.0.1"), &Rules{AllowDomains: []string{"*.allowed.test"}})
	if _, err := res.LookupHost(context.Background(), "api.test"); err != nil {
		t.Errorf("egress allow: %v", err)
	}
}

// TestOtherProtocols: bytes that are neither TLS nor HTTP pass untouched
// to an address the IP rules allow, and are reset otherwise.
// serveConns hands each connection ln accepts to its own serve goroutine
// until ln is closed.
func serveConns(ln net.Listener, serve func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go serve(c)
	}
}

func TestOtherProtocols(t *testing.T) {
	r := newRig(t)
	echo, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go serveConns(echo, func(c net.Conn) { io.Copy(c, c); c.Close() })
	r.to(echo)
	talk := func() (string, error) {
		c, err := net.Dial("tcp4", r.p.Addr().String())
		if err != nil {
			return "", err
		}
		defer c.Close()
		if _, err := io.WriteString(c, "SSH-2.0-test\r\n"); err != nil {
			return "", err
		}
		c.(*net.TCPConn).CloseWrite()
		b, err := io.ReadAll(c)
		return string(b), err
	}
	r.p.Set(netip.MustParseAddr("127.0.0.1"), &Rules{})
	if got, err := talk(); err != nil || got != "SSH-2.0-test\r\n" {
		t.Errorf("allowed address: %q %v, want the bytes echoed", got, err)
	}
	r.p.Set(netip.MustParseAddr("127.0.0.1"), &Rules{Deny: true, AllowDomains: []string{"api.test"}})
	if _, err := talk(); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("denied address: %v, want a reset", err)
	}
}

// TestEgressMetrics: every connection the proxy takes is counted, and
// every one it refuses is counted once under its reason: a source with no
// rules, a name or Host the policy does not allow, and a protocol it
// cannot judge toward an address it does not allow.
func TestEgressMetrics(t *testing.T) {
	r := newRig(t)
	c := r.client()
	conns := func() float64 { return metricstest.Value(t, "platinum_egress_connections_total") }
	blocked := func(reason string) float64 {
		return metricstest.Value(t, `platinum_egress_blocked_total{reason="`+reason+`"}`)
	}
	// The proxy counts a connection when it accepts it, a moment after the
	// client's call has returned (a reset reaches the client first).
	settle := func(f func() float64, want float64) float64 {
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if got := f(); got >= want || time.Now().After(end) {
				return got
			}
		}
	}
	c0, unknown0, policy0, proto0 := conns(), blocked("unknown_source"), blocked("policy"), blocked("protocol")

	r.to(r.httpUp)
	get(t, c, "GET", "http://api.test/", "", "") // no rules for the source yet
	if got := settle(func() float64 { return blocked("unknown_source") }, unknown0+1); got != unknown0+1 {
		t.Errorf("unknown_source = %v, want %v", got, unknown0+1)
	}

	r.p.Set(netip.MustParseAddr("127.0.0.1"), &Rules{Deny: true, AllowDomains: []string{"*.allowed.test"}})
	_, port, _ := net.SplitHostPort(r.httpUp.Addr().String())
	if _, _, err := get(t, c, "GET", "http://x.allowed.test:"+port+"/", "", ""); err != nil {
		t.Fatalf("allowed Host: %v", err)
	}
	get(t, c, "GET", "http://other.test:"+port+"/", "", "") // refused Host
	r.to(r.tlsUp)
	get(t, c, "GET", "https://other.test/", "", "") // refused SNI
	if got := settle(func() float64 { return blocked("policy") }, policy0+2); got != policy0+2 {
		t.Errorf("policy = %v, want %v (a refused Host and a refused SNI)", got, policy0+2)
	}

	raw, err := net.Dial("tcp4", r.p.Addr().String()) // neither TLS nor HTTP, to a denied address
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(raw, "SSH-2.0-test\r\n")
	io.ReadAll(raw)
	raw.Close()
	if got := settle(func() float64 { return blocked("protocol") }, proto0+1); got != proto0+1 {
		t.Errorf("protocol = %v, want %v", got, proto0+1)
	}
	if got := settle(conns, c0+5); got != c0+5 {
		t.Errorf("connections = %v, want %v (five taken, four refused)", got, c0+5)
	}
}
