package egress

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"
)

// Resolver resolves names for the DNS filter and for checking name-based
// allows: first from HostsFile (re-read when it changes), then through
// the host's resolver. Only IPv4 answers are used (sandboxes have no IPv6).
type Resolver struct {
	// HostsFile is an /etc/hosts-style file ("address name…" lines)
	// consulted first; empty means none. Tests map names to addresses in
	// their own network namespaces with it, so nothing leaves the machine.
	HostsFile string
	// System is the fallback; nil means net.DefaultResolver.
	System *net.Resolver
	// NoSystem answers from HostsFile only.
	NoSystem bool

	mu    sync.Mutex
	mtime time.Time
	size  int64
	hosts map[string][]netip.Addr
}

// Lookup returns name's IPv4 addresses.
func (r *Resolver) Lookup(ctx context.Context, name string) ([]netip.Addr, error) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if addrs := r.fromHosts(name); len(addrs) > 0 {
		return addrs, nil
	}
	if r.NoSystem {
		return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	sys := r.System
	if sys == nil {
		sys = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := sys.LookupNetIP(ctx, "ip4", name)
	if err != nil {
		return nil, err
	}
	out := addrs[:0]
	for _, a := range addrs {
		if a = a.Unmap(); a.Is4() {
			out = append(out, a)
		}
	}
	return out, nil
}

func (r *Resolver) fromHosts(name string) []netip.Addr {
	if r.HostsFile == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if fi, err := os.Stat(r.HostsFile); err == nil && (!fi.ModTime().Equal(r.mtime) || fi.Size() != r.size) {
		if b, err := os.ReadFile(r.HostsFile); err == nil {
			r.hosts, r.mtime, r.size = parseHosts(b), fi.ModTime(), fi.Size()
		}
	}
	return r.hosts[name]
}

func parseHosts(b []byte) map[string][]netip.Addr {
	m := map[string][]netip.Addr{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		a, err := netip.ParseAddr(f[0])
		if err != nil || !a.Is4() {
			continue
		}
		for _, n := range f[1:] {
			n = strings.ToLower(n)
			m[n] = append(m[n], a)
		}
	}
	return m
}
