// Package webhook is the HTTP side of webhook deliveries: it signs a body
// (HMAC-SHA256 over "<unix seconds>.<body>") and POSTs it with a client
// that refuses to connect where a webhook must not reach (metadata and, by
// default, loopback and private addresses), checked on the address it
// actually dials so DNS cannot route around the policy. The control plane
// decides what to send and when; this package only sends.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// SignatureHeader is the header carrying a delivery's signature.
const SignatureHeader = "X-Pt-Signature"

// Sign returns the X-Pt-Signature value of body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<unix seconds>.<body>" keyed
// by the webhook's secret>". Receivers recompute it, compare in constant
// time and refuse old timestamps (replays).
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// sharedSpace is 100.64.0.0/10 (RFC 6598), where sandboxes get addresses.
var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")

// CheckAddr reports whether a delivery may connect to addr: never to
// unspecified, multicast, broadcast, "this network" or link-local
// addresses (cloud metadata lives there); to loopback, private and shared
// (CGNAT, the sandbox subnet) addresses only with allowPrivate. Refusals
// wrap sandbox.ErrInvalidArgument.
func CheckAddr(addr netip.Addr, allowPrivate bool) error {
	addr = addr.Unmap()
	switch {
	case !addr.IsValid(), addr.IsUnspecified(), addr.IsMulticast(), addr.IsLinkLocalUnicast(),
		addr.IsLinkLocalMulticast(), addr.IsInterfaceLocalMulticast(), addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}),
		addr.Is4() && addr.As4()[0] == 0:
		return fmt.Errorf("webhook address %s is not routable for webhooks: %w", addr, sandbox.ErrInvalidArgument)
	case addr.IsLoopback(), addr.IsPrivate(), sharedSpace.Contains(addr):
		if !allowPrivate {
			return fmt.Errorf("webhook address %s is loopback or private; ptd refuses those unless started with --webhook-allow-private: %w",
				addr, sandbox.ErrInvalidArgument)
		}
	}
	return nil
}

// Client sends deliveries. It is safe for concurrent use.
type Client struct {
	hc      *http.Client
	timeout time.Duration
}

// NewClient returns a client that connects only where CheckAddr allows,
// ignores proxy settings, follows no redirects and bounds each send by
// timeout (connect to the last response byte).
func NewClient(allowPrivate bool, timeout time.Duration) *Client {
	dialer := &net.Dialer{
		Timeout: 5 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("webhook address %q: %w", address, err)
			}
			return CheckAddr(ap.Addr(), allowPrivate)
		},
	}
	return &Client{
		timeout: timeout,
		hc: &http.Client{
			Transport: &http.Transport{DialContext: dialer.DialContext, Proxy: nil, MaxIdleConnsPerHost: 2,
				IdleConnTimeout: 30 * time.Second, TLSHandshakeTimeout: 5 * time.Second},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// Post sends body as JSON to url with the given extra headers and a
// signature made with secret at the current time. It returns the
// receiver's status (0 when there was no answer); only a 2xx answer is a
// success, anything else (a redirect too) an error.
func (c *Client) Post(ctx context.Context, url, secret string, headers map[string]string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "platinum-webhooks/1")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	req.Header.Set(SignatureHeader, Sign(secret, time.Now(), body))
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("receiver answered %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}
