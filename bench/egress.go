package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/egress"
)

// egressBench measures what the egress proxy adds to a small HTTPS GET
// when it injects a secret: the proxy terminates the sandbox's TLS with
// the sandbox's CA, swaps the placeholder, and opens verified TLS to the
// upstream. Direct GETs to the same upstream in the same run are the
// baseline. Both run on loopback in this process (the proxy's original
// destination is given instead of read from conntrack), so the numbers
// are the proxy's own cost without sandbox or exec noise; the REDIRECT
// rule that sends sandbox traffic to it adds microseconds.
func egressBench(n int) error {
	sbxCA, _, err := egress.NewCA("bench sandbox")
	if err != nil {
		return err
	}
	upCA, _, err := egress.NewCA("bench upstream")
	if err != nil {
		return err
	}
	const placeholder, value = "pt_secret_00000000000000000000000000000000", "sk-bench-secret-value"
	up, err := tls.Listen("tcp4", "127.0.0.1:0", &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return upCA.Leaf(hi.ServerName)
	}})
	if err != nil {
		return err
	}
	blob := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/100mb" {
			for range 100 {
				w.Write(blob)
			}
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+value {
			http.Error(w, "no secret", http.StatusForbidden)
			return
		}
		io.WriteString(w, "ok")
	})}
	go srv.Serve(up)
	defer srv.Close()
	upAddr := netip.MustParseAddrPort(up.Addr().String())
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(upCA.CertPEM)
	p := egress.New(egress.Config{
		Listen:        netip.MustParseAddrPort("127.0.0.1:0"),
		UpstreamRoots: roots,
		OriginalDst:   func(net.Conn) (netip.AddrPort, error) { return upAddr, nil },
	}, nil)
	if err := p.Start(context.Background()); err != nil {
		return err
	}
	defer p.Close()
	p.Set(netip.MustParseAddr("127.0.0.1"), &egress.Rules{CA: sbxCA,
		Secrets: []egress.Secret{{Placeholder: placeholder, Value: value, Hosts: []string{"api.bench.test"}}}})

	client := func(target string, trust *egress.CA, keepAlive bool) *http.Client {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(trust.CertPEM)
		return &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp4", target)
			},
			TLSClientConfig:   &tls.Config{RootCAs: pool},
			DisableKeepAlives: !keepAlive,
			ForceAttemptHTTP2: false,
		}}
	}
	measure := func(c *http.Client, auth string) ([]time.Duration, error) {
		var ds []time.Duration
		for i := 0; i < n+n/10+1; i++ {
			req, _ := http.NewRequest("GET", "https://api.bench.test/", nil)
			req.Header.Set("Authorization", "Bearer "+auth)
			t0 := time.Now()
			resp, err := c.Do(req)
			if err != nil {
				return nil, err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return nil, fmt.Errorf("status %d", resp.StatusCode)
			}
			if i > n/10 { // warm-up runs are not counted
				ds = append(ds, time.Since(t0))
			}
		}
		return ds, nil
	}
	fmt.Println("egress proxy: small HTTPS GET with a secret injected, vs direct (loopback, in-process)")
	for _, ka := range []bool{false, true} {
		label := "new connection"
		if ka {
			label = "kept-alive connection"
		}
		direct, err := measure(client(up.Addr().String(), upCA, ka), value)
		if err != nil {
			return fmt.Errorf("direct: %w", err)
		}
		proxied, err := measure(client(p.Addr().String(), sbxCA, ka), placeholder)
		if err != nil {
			return fmt.Errorf("proxied: %w", err)
		}
		benchkit.Report("direct HTTPS GET, "+label, direct, nil)
		benchkit.Report("via egress proxy, "+label, proxied, direct)
		d, q := benchkit.Percentiles(direct)[0], benchkit.Percentiles(proxied)[0]
		fmt.Printf("%-42s p50 added %s\n", "", benchkit.MS(q-d))
	}
	// Throughput of a 100 MB download: direct, through the proxy with TLS
	// terminated (a secret is bound: the body is scanned for values), and
	// spliced (no secret for the host: bytes pass untouched).
	p.Set(netip.MustParseAddr("127.0.0.1"), &egress.Rules{CA: sbxCA,
		Secrets: []egress.Secret{{Placeholder: placeholder, Value: value, Hosts: []string{"api.bench.test"}}}})
	download := func(c *http.Client, host string) (float64, error) {
		best := 0.0
		for range 3 {
			t0 := time.Now()
			resp, err := c.Get("https://" + host + "/100mb")
			if err != nil {
				return 0, err
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if n != 100<<20 {
				return 0, fmt.Errorf("got %d bytes", n)
			}
			best = max(best, float64(n)/time.Since(t0).Seconds()/1e9)
		}
		return best, nil
	}
	both := x509.NewCertPool()
	both.AppendCertsFromPEM(sbxCA.CertPEM)
	both.AppendCertsFromPEM(upCA.CertPEM)
	viaProxy := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp4", p.Addr().String())
		},
		TLSClientConfig: &tls.Config{RootCAs: both},
	}}
	direct, err := download(client(up.Addr().String(), upCA, true), "api.bench.test")
	if err != nil {
		return fmt.Errorf("direct download: %w", err)
	}
	terminated, err := download(viaProxy, "api.bench.test")
	if err != nil {
		return fmt.Errorf("terminated download: %w", err)
	}
	spliced, err := download(viaProxy, "other.bench.test")
	if err != nil {
		return fmt.Errorf("spliced download: %w", err)
	}
	fmt.Printf("100 MB HTTPS download (best of 3): direct %.2f GB/s, proxy terminating TLS %.2f GB/s (%.2fx), proxy splicing %.2f GB/s (%.2fx)\n",
		direct, terminated, terminated/direct, spliced, spliced/direct)
	return nil
}
