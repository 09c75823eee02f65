package network

import (
	"fmt"
	"net/netip"
	"strings"
)

// Policy is one sandbox's outbound rules as the host's packet filter
// enforces them. The zero Policy is the default: egress allowed, nothing
// redirected. Traffic the policy blocks is rejected (TCP reset, ICMP port
// unreachable), never dropped, so a blocked connect fails at once.
//
// The invariants (no other sandbox, no host port but the API, no
// link-local address) are in the bridge's own chains, ahead of any policy:
// no Policy can open them.
type Policy struct {
	// Deny rejects every destination no AllowCIDRs entry matches.
	Deny bool
	// AllowCIDRs are always reachable; they win over DenyCIDRs.
	AllowCIDRs []netip.Prefix
	// DenyCIDRs are rejected unless an AllowCIDRs entry matches.
	DenyCIDRs []netip.Prefix
	// Proxy redirects TCP 80 and 443 to the egress proxy (Config.ProxyPort)
	// for destinations the IP rules allow (secret injection).
	Proxy bool
	// ProxyAll redirects TCP 80 and 443 to the proxy whatever the
	// destination, for domain rules the proxy decides on by Host or SNI.
	ProxyAll bool
	// DNS redirects DNS (port 53) to the host's filtering resolver
	// (Config.DNSPort).
	DNS bool
}

// IsZero reports whether p needs no rules at all.
func (p Policy) IsZero() bool {
	return !p.Deny && len(p.AllowCIDRs) == 0 && len(p.DenyCIDRs) == 0 && !p.Proxy && !p.ProxyAll && !p.DNS
}

// policyChains names one sandbox's chains from the hash in its names.
func policyChains(hash string) (filter, nat string) { return "PTE-" + hash, "PTN-" + hash }

// policyRules renders one sandbox's chains for iptables-restore. The
// filter chain runs in FORWARD for the sandbox's routed traffic (what was
// not redirected); the nat chain runs in PREROUTING and picks what goes to
// the proxy and the DNS filter.
func (m *Manager) policyRules(hash string, p Policy) string {
	fc, nc := policyChains(hash)
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	reject := func(chain, match string) {
		w("-A %s %s-p tcp -j REJECT --reject-with tcp-reset", chain, match)
		w("-A %s %s-j REJECT --reject-with icmp-port-unreachable", chain, match)
	}
	w("*filter")
	w(":%s - [0:0]", fc)
	for _, c := range p.AllowCIDRs {
		w("-A %s -d %s -j RETURN", fc, c)
	}
	for _, c := range p.DenyCIDRs {
		reject(fc, "-d "+c.String()+" ")
	}
	if p.Deny {
		reject(fc, "")
	}
	w("COMMIT")
	w("*nat")
	w(":%s - [0:0]", nc)
	if p.DNS && m.cfg.DNSPort != 0 {
		// Whichever nameserver the sandbox asks (its resolv.conf, or the
		// gateway), the filter answers.
		for _, proto := range []string{"udp", "tcp"} {
			w("-A %s -p %s --dport 53 -j REDIRECT --to-ports %d", nc, proto, m.cfg.DNSPort)
		}
	}
	w("-A %s -d %s/32 -j RETURN", nc, m.gateway)
	if (p.Proxy || p.ProxyAll) && m.cfg.ProxyPort != 0 {
		// What the invariants reject never reaches the proxy.
		w("-A %s -d 169.254.0.0/16 -j RETURN", nc)
		w("-A %s -d %s -j RETURN", nc, m.cfg.Subnet)
		w("-A %s -m addrtype --dst-type LOCAL -j RETURN", nc)
		redirect := fmt.Sprintf("-p tcp -m multiport --dports 80,443 -j REDIRECT --to-ports %d", m.cfg.ProxyPort)
		if !p.ProxyAll {
			// Only what the IP rules allow goes to the proxy; the rest
			// is rejected in FORWARD, so it fails at connect.
			for _, c := range p.AllowCIDRs {
				w("-A %s -d %s %s", nc, c, redirect)
			}
			for _, c := range p.DenyCIDRs {
				w("-A %s -d %s -j RETURN", nc, c)
			}
			if p.Deny {
				w("-A %s -j RETURN", nc)
			}
		}
		w("-A %s %s", nc, redirect)
	}
	w("COMMIT")
	return b.String()
}
