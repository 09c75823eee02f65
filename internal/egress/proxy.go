package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/metrics"
)

// handshakeTimeout bounds how long a client may take to send its first
// bytes (HTTP request line or TLS ClientHello); idleTimeout how long a
// kept-alive connection may wait for its next request.
const (
	handshakeTimeout = 30 * time.Second
	idleTimeout      = 2 * time.Minute
)

// conn is one redirected connection being handled.
type conn struct {
	p     *Proxy
	c     net.Conn
	br    *bufio.Reader
	rules *Rules
	dst   netip.AddrPort
}

func (p *Proxy) handle(c net.Conn) {
	defer c.Close()
	metrics.EgressConnection()
	src, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	rules := p.lookup(src.Addr().Unmap())
	dst, err := p.cfg.OriginalDst(c)
	if rules == nil || err != nil || p.cfg.Forbidden(dst.Addr()) || dst == netip.MustParseAddrPort(p.ln.Addr().String()) {
		p.log.Debug("refused", "src", src, "dst", dst, "known", rules != nil, "err", err)
		reason := "forbidden"
		if rules == nil || err != nil {
			reason = "unknown_source"
		}
		metrics.EgressBlocked(reason)
		reset(c)
		return
	}
	h := &conn{p: p, c: c, br: bufio.NewReaderSize(c, 5+16<<10), rules: rules, dst: dst}
	c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	first, err := h.br.Peek(1)
	if err != nil {
		return
	}
	switch {
	case first[0] == 0x16: // TLS handshake record
		h.tls()
	case looksHTTP(h.br):
		h.plain()
	case rules.allowIP(dst.Addr()):
		// Another protocol on port 80 or 443: no name to judge by, so the
		// IP rules decide, and bytes pass untouched.
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
		defer cancel()
		h.splice(ctx)
	default:
		metrics.EgressBlocked("protocol")
		reset(c)
	}
}

// httpMethods start every HTTP/1 request line the proxy handles.
var httpMethods = []string{"GET ", "HEAD ", "POST ", "PUT ", "DELETE ", "PATCH ", "OPTIONS ", "TRACE ", "CONNECT "}

// looksHTTP reports whether the bytes read so far can start an HTTP/1
// request.
func looksHTTP(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	for _, m := range httpMethods {
		if strings.HasPrefix(string(b), m) || strings.HasPrefix(m, string(b)) {
			return true
		}
	}
	return false
}

// reset closes c with a TCP RST: the client sees "connection reset", at
// once, instead of a clean end it could mistake for an answer.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// allowed decides a connection to dst for name (Host or SNI; may be
// empty). A domain rule allows a connection only to an address the name
// resolves to, so a name cannot be borrowed to reach another address.
func (h *conn) allowed(ctx context.Context, name string) bool {
	if h.rules.allowIP(h.dst.Addr()) {
		return true
	}
	return h.rules.allowName(name) && h.resolvesTo(ctx, name)
}

// resolvesTo reports whether name resolves to the connection's destination.
func (h *conn) resolvesTo(ctx context.Context, name string) bool {
	addrs, err := h.p.cfg.Resolver.Lookup(ctx, name)
	return err == nil && slices.Contains(addrs, h.dst.Addr())
}

// tls handles a TLS connection: refused, spliced through untouched, or
// terminated (only when a secret is bound to the SNI name).
func (h *conn) tls() {
	hello, err := peekClientHello(h.br)
	if err != nil {
		reset(h.c)
		return
	}
	ctx, cancel := context.WithTimeout(h.p.ctx, h.p.cfg.DialTimeout)
	defer cancel()
	sni := strings.ToLower(hello.ServerName)
	if !h.allowed(ctx, sni) {
		h.p.log.Info("egress refused", "dst", h.dst, "sni", sni)
		metrics.EgressBlocked("policy")
		reset(h.c)
		return
	}
	if sni == "" || h.rules.CA == nil || len(h.rules.secretsFor(sni)) == 0 {
		h.splice(ctx)
		return
	}
	leaf, err := h.rules.CA.Leaf(sni)
	if err != nil {
		h.p.log.Warn("egress leaf", "sni", sni, "err", err)
		reset(h.c)
		return
	}
	tc := tls.Server(&prefixConn{Conn: h.c, r: h.br}, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	if err := tc.HandshakeContext(ctx); err != nil {
		h.p.log.Debug("egress client handshake", "sni", sni, "err", err)
		return
	}
	h.c.SetReadDeadline(time.Time{})
	h.serveHTTP(tc, bufio.NewReader(tc), sni, true)
}

// splice connects to the destination and copies bytes both ways,
// including what was already read.
func (h *conn) splice(ctx context.Context) {
	up, err := (&net.Dialer{}).DialContext(ctx, "tcp4", h.dst.String())
	if err != nil {
		h.p.log.Debug("egress dial", "dst", h.dst, "err", err)
		reset(h.c)
		return
	}
	defer up.Close()
	h.c.SetReadDeadline(time.Time{})
	// Send what was read ahead, then copy socket to socket (the kernel
	// splices TCP to TCP without copying through user space).
	if n := h.br.Buffered(); n > 0 {
		b, _ := h.br.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
		h.br.Discard(n)
	}
	pipe(h.c, up)
}

// pipe copies both ways until both directions end.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Add(2)
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}

// plain handles cleartext HTTP: the Host header names the destination.
func (h *conn) plain() {
	h.serveHTTP(h.c, h.br, "", false)
}

// serveHTTP forwards requests read from client to the destination, one
// upstream connection per client connection. sni is the TLS name (for a
// terminated connection; upstream is verified against it).
func (h *conn) serveHTTP(client net.Conn, br *bufio.Reader, sni string, isTLS bool) {
	var up net.Conn
	var upr *bufio.Reader
	defer func() {
		if up != nil {
			up.Close()
		}
	}()
	for first := true; ; first = false {
		if !first {
			// An idle kept-alive connection does not hold the proxy forever.
			h.c.SetReadDeadline(time.Now().Add(idleTimeout))
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		client.SetReadDeadline(time.Time{})
		h.c.SetReadDeadline(time.Time{})
		host := hostOnly(req.Host)
		ctx, cancel := context.WithTimeout(h.p.ctx, h.p.cfg.DialTimeout)
		name := host
		if isTLS {
			name = sni
			if host != "" && !strings.EqualFold(host, sni) {
				// A request for another name over this connection gets no
				// secret of that name's, and needs its own allow.
				name = ""
			}
		}
		if !isTLS && !h.allowed(ctx, host) {
			cancel()
			h.p.log.Info("egress refused", "dst", h.dst, "host", host)
			metrics.EgressBlocked("policy")
			reset(h.c)
			return
		}
		secrets := h.rules.secretsFor(name)
		if !isTLS && len(secrets) > 0 && !h.resolvesTo(ctx, host) {
			// Cleartext has no certificate to prove who answers: secrets go
			// only to an address the name really has.
			secrets = nil
		}
		if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
			// The proxy reads the body before the upstream sees the
			// request: let the client send it now.
			req.Header.Del("Expect")
			if _, err := io.WriteString(client, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
				cancel()
				return
			}
		}
		if err := h.inject(req, secrets); err != nil {
			cancel()
			reset(h.c)
			return
		}
		if up == nil {
			up, err = h.dialUpstream(ctx, sni, isTLS)
			if err != nil {
				cancel()
				h.p.log.Info("egress upstream", "dst", h.dst, "sni", sni, "err", err)
				if isTLS {
					writeError(client, http.StatusBadGateway, "platinum egress: upstream: "+err.Error())
				}
				reset(h.c)
				return
			}
			upr = bufio.NewReader(up)
		}
		cancel()
		if err := req.Write(up); err != nil {
			return
		}
		resp, err := http.ReadResponse(upr, req)
		for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			// Interim answers (100 Continue, 103 Early Hints) pass on;
			// the final one follows.
			scrub(resp.Header, secrets)
			if err := resp.Write(client); err != nil {
				return
			}
			resp, err = http.ReadResponse(upr, req)
		}
		if err != nil {
			return
		}
		scrub(resp.Header, secrets)
		scrubBody(resp, secrets)
		if resp.StatusCode == http.StatusSwitchingProtocols {
			if err := resp.Write(client); err != nil {
				return
			}
			pipe(&prefixConn{Conn: client, r: br}, &prefixConn{Conn: up, r: upr})
			return
		}
		err = resp.Write(client)
		resp.Body.Close()
		if err != nil || resp.Close || req.Close {
			return
		}
	}
}

// dialUpstream connects to the original destination; over TLS it
// verifies the server's certificate for sni with the configured roots.
func (h *conn) dialUpstream(ctx context.Context, sni string, isTLS bool) (net.Conn, error) {
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp4", h.dst.String())
	if err != nil {
		return nil, err
	}
	if !isTLS {
		return raw, nil
	}
	tc := tls.Client(raw, &tls.Config{ServerName: sni, RootCAs: h.p.cfg.UpstreamRoots, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	return tc, nil
}

// inject replaces each secret's placeholder with its value in the
// request's headers (and body, for secrets that ask).
func (h *conn) inject(req *http.Request, secrets []Secret) error {
	if len(secrets) == 0 {
		return nil
	}
	pairs := make([]string, 0, 2*len(secrets))
	body := false
	for _, s := range secrets {
		pairs = append(pairs, s.Placeholder, s.Value)
		body = body || s.Body
	}
	rep := strings.NewReplacer(pairs...)
	for k, vs := range req.Header {
		for i, v := range vs {
			vs[i] = rep.Replace(v)
		}
		req.Header[k] = vs
	}
	if req.URL != nil {
		// Query strings carry API keys too (?key=…).
		req.URL.RawQuery = rep.Replace(req.URL.RawQuery)
	}
	if !body || req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	var bodyPairs []string
	for _, s := range secrets {
		if s.Body {
			bodyPairs = append(bodyPairs, s.Placeholder, s.Value)
		}
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, h.p.cfg.MaxBodyBytes+1))
	if err != nil {
		return err
	}
	if int64(len(b)) > h.p.cfg.MaxBodyBytes {
		// Too large to rewrite: send it as it is.
		req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), req.Body))
		return nil
	}
	b = []byte(strings.NewReplacer(bodyPairs...).Replace(string(b)))
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.ContentLength = int64(len(b))
	req.TransferEncoding = nil
	req.Header.Set("Content-Length", strconv.Itoa(len(b)))
	return nil
}

// scrub puts placeholders back where a response header echoes a value,
// so an answer never carries a secret into the sandbox.
func scrub(hdr http.Header, secrets []Secret) {
	if len(secrets) == 0 {
		return
	}
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s.Value, s.Placeholder)
	}
	rep := strings.NewReplacer(pairs...)
	for _, vs := range hdr {
		for i, v := range vs {
			vs[i] = rep.Replace(v)
		}
	}
}

// scrubBody puts placeholders back where a response body from a host that
// got secrets echoes a value (an API that reflects the request, an error
// that quotes a header). The body streams through; its length may change,
// so it is re-framed as chunked. Compressed bodies are not looked into.
func scrubBody(resp *http.Response, secrets []Secret) {
	if len(secrets) == 0 || resp.Body == nil || resp.Body == http.NoBody || resp.Header.Get("Content-Encoding") != "" {
		return
	}
	r := &scrubReader{src: resp.Body}
	for _, s := range secrets {
		r.values = append(r.values, []byte(s.Value))
		r.placeholders = append(r.placeholders, []byte(s.Placeholder))
		r.keep = max(r.keep, len(s.Value)-1)
	}
	resp.Body = r
	resp.ContentLength = -1
	resp.TransferEncoding = []string{"chunked"}
	resp.Header.Del("Content-Length")
}

// scrubReader replaces values with placeholders in a stream. It holds back
// the last keep bytes of what it read (one less than the longest value),
// so a value split across reads is still found: any value that starts
// before the held-back tail lies wholly in the buffer.
type scrubReader struct {
	src                  io.ReadCloser
	values, placeholders [][]byte
	keep                 int
	buf, out, chunk      []byte
	eof                  bool
}

func (r *scrubReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.eof && len(r.buf) == 0 {
			return 0, io.EOF
		}
		if !r.eof {
			if r.chunk == nil {
				r.chunk = make([]byte, 64<<10)
			}
			n, err := r.src.Read(r.chunk)
			r.buf = append(r.buf, r.chunk[:n]...)
			if err == io.EOF {
				r.eof = true
			} else if err != nil {
				return 0, err
			}
		}
		limit := len(r.buf) - r.keep
		if r.eof {
			limit = len(r.buf)
		}
		r.process(limit)
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// process moves buf[:limit] (and any value starting there) to out, with
// values replaced.
func (r *scrubReader) process(limit int) {
	i := 0
	for i < limit {
		best, which := -1, -1
		for k, v := range r.values {
			if j := bytes.Index(r.buf[i:], v); j >= 0 && i+j < limit && (best < 0 || i+j < best) {
				best, which = i+j, k
			}
		}
		if best < 0 {
			r.out = append(r.out, r.buf[i:limit]...)
			i = limit
			break
		}
		r.out = append(r.out, r.buf[i:best]...)
		r.out = append(r.out, r.placeholders[which]...)
		i = best + len(r.values[which])
	}
	if i > 0 {
		r.buf = r.buf[:copy(r.buf, r.buf[i:])]
	}
}

func (r *scrubReader) Close() error { return r.src.Close() }

func writeError(c net.Conn, code int, msg string) {
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(msg), msg)
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return strings.ToLower(h)
	}
	return strings.ToLower(strings.Trim(hostport, "[]"))
}

// prefixConn is a net.Conn whose reads come from r (which buffered the
// start of the stream) before the socket.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes the underlying TCP connection, if it is one.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// errHelloRead stops the handshake once the ClientHello is read.
var errHelloRead = errors.New("client hello read")

// peekClientHello parses the TLS ClientHello waiting in br without
// consuming it: crypto/tls reads it from a copy of the buffered bytes and
// stops.
func peekClientHello(br *bufio.Reader) (*tls.ClientHelloInfo, error) {
	// A record header says how long the first record is; the ClientHello
	// fits in it (up to 16 KiB plus header).
	hdr, err := br.Peek(5)
	if err != nil {
		return nil, err
	}
	n := 5 + (int(hdr[3])<<8 | int(hdr[4]))
	if n > br.Size() {
		return nil, errors.New("client hello too large")
	}
	rec, err := br.Peek(n)
	if err != nil {
		return nil, err
	}
	var hello *tls.ClientHelloInfo
	err = tls.Server(&readOnlyConn{r: bytes.NewReader(rec)}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			hello = h
			return nil, errHelloRead
		},
	}).Handshake()
	if hello == nil {
		return nil, fmt.Errorf("client hello: %w", err)
	}
	return hello, nil
}

// readOnlyConn feeds bytes to a tls.Server and swallows what it writes.
type readOnlyConn struct {
	net.Conn
	r io.Reader
}

func (c *readOnlyConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c *readOnlyConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *readOnlyConn) Close() error                     { return nil }
func (c *readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (c *readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (c *readOnlyConn) SetWriteDeadline(time.Time) error { return nil }
func (c *readOnlyConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *readOnlyConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
