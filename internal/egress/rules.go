package egress

import (
	"net/netip"
	"strings"
)

// Rules are one sandbox's egress rules as the proxy applies them.
type Rules struct {
	// Deny refuses what no allow entry matches (egress "deny").
	Deny bool
	// AllowCIDRs and AllowDomains are reachable whatever DenyCIDRs says.
	AllowCIDRs []netip.Prefix
	// AllowDomains are exact names or "*.suffix" (any name below suffix).
	AllowDomains []string
	DenyCIDRs    []netip.Prefix
	// Secrets are swapped in toward their hosts.
	Secrets []Secret
	// CA signs the certificates the proxy shows the sandbox when it
	// terminates TLS; nil means TLS is never terminated (no injection over
	// HTTPS).
	CA *CA
}

// Secret is one secret the proxy injects.
type Secret struct {
	// Placeholder is what the sandbox has (pt_secret_…); Value replaces it.
	Placeholder, Value string
	// Hosts the value may go to (exact names or "*.suffix"); empty means
	// any host.
	Hosts []string
	// Body also replaces the placeholder in request bodies.
	Body bool
}

// allowIP is the decision by address alone.
func (r *Rules) allowIP(a netip.Addr) bool {
	for _, c := range r.AllowCIDRs {
		if c.Contains(a) {
			return true
		}
	}
	for _, c := range r.DenyCIDRs {
		if c.Contains(a) {
			return false
		}
	}
	return !r.Deny
}

// allowName reports whether a domain rule allows name.
func (r *Rules) allowName(name string) bool {
	return name != "" && MatchAny(r.AllowDomains, name)
}

// secretsFor returns the secrets bound to host.
func (r *Rules) secretsFor(host string) []Secret {
	var out []Secret
	for _, s := range r.Secrets {
		if len(s.Hosts) == 0 || (host != "" && MatchAny(s.Hosts, host)) {
			out = append(out, s)
		}
	}
	return out
}

// MatchAny reports whether name matches one of patterns: an exact name
// (case-insensitive) or "*.suffix", which matches any name below suffix
// but not suffix itself.
func MatchAny(patterns []string, name string) bool {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	for _, p := range patterns {
		p = strings.ToLower(p)
		if suffix, ok := strings.CutPrefix(p, "*."); ok {
			if strings.HasSuffix(name, "."+suffix) {
				return true
			}
		} else if p == name {
			return true
		}
	}
	return false
}
