// Package egress is the host's transparent egress proxy and DNS filter for
// sandboxes. The packet filter (internal/host/network) redirects a
// sandbox's TCP 80/443 and DNS traffic here when its policy needs a
// decision by name or a secret swapped; the proxy finds the sandbox by the
// connection's source address and the intended destination by
// SO_ORIGINAL_DST.
//
// It does three jobs no packet filter can: allow or refuse by HTTP Host
// header and TLS SNI (domain rules), answer DNS only for allowed names,
// and replace secret placeholders (pt_secret_…) with their values in
// requests toward the hosts each secret is bound to, so a secret's value
// never enters the sandbox. For HTTPS it terminates TLS with a CA of the
// sandbox's own (which the sandbox trusts) only for hosts that get a
// secret, and verifies the upstream normally; other TLS is spliced
// through untouched. A refused connection is reset, never left hanging.
package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Config configures a Proxy.
type Config struct {
	// Listen is the proxy's TCP address (the bridge gateway and
	// network.Config.ProxyPort); DNSListen the DNS filter's (UDP and TCP).
	// A zero DNSListen serves no DNS.
	Listen, DNSListen netip.AddrPort
	// UpstreamRoots verifies upstream TLS servers when the proxy terminates
	// TLS; nil means the system roots. Tests add their own root here
	// instead of ever skipping verification.
	UpstreamRoots *x509.CertPool
	// Resolver answers DNS for allowed names and checks that a name-based
	// allow goes to an address of that name; nil uses the system resolver.
	Resolver *Resolver
	// Forbidden reports destinations the proxy never connects to whatever
	// the rules (other sandboxes, the host itself, link-local); the packet
	// filter keeps them away too, this is the second wall.
	Forbidden func(netip.Addr) bool
	// OriginalDst finds where a redirected connection was going; nil reads
	// SO_ORIGINAL_DST (tests of the package set their own).
	OriginalDst func(net.Conn) (netip.AddrPort, error)
	// DialTimeout bounds upstream connects (default 10 s).
	DialTimeout time.Duration
	// MaxBodyBytes bounds the request bodies the proxy reads to replace
	// placeholders in (default 8 MiB); larger bodies pass unchanged.
	MaxBodyBytes int64
}

// Proxy is the egress proxy and DNS filter. Start it with Start, feed it
// each sandbox's rules with Set, and stop it with Close.
type Proxy struct {
	cfg Config
	log *slog.Logger

	mu    sync.RWMutex
	rules map[netip.Addr]*Rules
	conns map[net.Conn]struct{} // open client connections, closed by Close

	ln    net.Listener
	dns   *dnsServer
	wg    sync.WaitGroup
	ctx   context.Context
	close context.CancelFunc
}

// New returns a Proxy that serves nothing until Start.
func New(cfg Config, logger *slog.Logger) *Proxy {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Resolver == nil {
		cfg.Resolver = &Resolver{}
	}
	if cfg.OriginalDst == nil {
		cfg.OriginalDst = originalDst
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 8 << 20
	}
	if cfg.Forbidden == nil {
		cfg.Forbidden = func(netip.Addr) bool { return false }
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Proxy{cfg: cfg, log: logger.With("component", "egress"), rules: map[netip.Addr]*Rules{}, conns: map[net.Conn]struct{}{}, ctx: ctx, close: cancel}
}

// Start listens on the configured addresses and serves until Close.
func (p *Proxy) Start(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp4", p.cfg.Listen.String())
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	p.ln = ln
	if p.cfg.DNSListen.IsValid() {
		if p.dns, err = p.startDNS(ctx); err != nil {
			ln.Close()
			return err
		}
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				p.log.Warn("accept", "err", err)
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if !p.track(c, true) {
				c.Close()
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer p.track(c, false)
				p.handle(c)
			}()
		}
	}()
	return nil
}

// Addr is the proxy's listening address (after Start).
func (p *Proxy) Addr() net.Addr { return p.ln.Addr() }

// DNSAddr is the DNS filter's UDP address (after Start with DNSListen).
func (p *Proxy) DNSAddr() net.Addr { return p.dns.udp.LocalAddr() }

// Close stops listening, ends every connection in flight and waits.
func (p *Proxy) Close() error {
	p.close()
	var err error
	if p.ln != nil {
		err = p.ln.Close()
	}
	if p.dns != nil {
		p.dns.close()
	}
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// Set installs the rules for the sandbox at addr (replacing any); a nil r
// removes them. Connections already open keep the rules they started with.
func (p *Proxy) Set(addr netip.Addr, r *Rules) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r == nil {
		delete(p.rules, addr)
		return
	}
	p.rules[addr] = r
}

// track adds or removes an open client connection; it refuses to add
// once the proxy is closing.
func (p *Proxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		delete(p.conns, c)
		return true
	}
	if p.ctx.Err() != nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) lookup(addr netip.Addr) *Rules {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.rules[addr]
}
