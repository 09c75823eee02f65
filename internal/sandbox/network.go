package sandbox

// NetworkPolicy is a sandbox's outbound network policy (docs/preview-and-network.md). The zero
// value (and nil) means egress allowed with no lists. Whatever the policy,
// a sandbox never reaches another sandbox, the host's own ports (except
// the API on its gateway) or link-local addresses.
type NetworkPolicy struct {
	// Egress is "allow" (the default) or "deny": what happens to traffic
	// no list matches.
	Egress string `json:"egress"`
	// AllowOut lists IPv4 CIDRs (or addresses) and domain names (exact, or
	// "*.suffix" for any name below suffix) the sandbox may reach; it wins
	// over DenyOut. Domain rules apply to HTTP (Host header) and TLS (SNI)
	// on ports 80 and 443, through the host's egress proxy.
	AllowOut []string `json:"allow_out"`
	// DenyOut lists IPv4 CIDRs the sandbox may not reach.
	DenyOut []string `json:"deny_out"`
}

// Egress policy values.
const (
	EgressAllow = "allow"
	EgressDeny  = "deny"
)

// IsDefault reports whether p changes nothing: egress allowed, no lists.
func (p *NetworkPolicy) IsDefault() bool {
	return p == nil || (p.Egress != EgressDeny && len(p.AllowOut) == 0 && len(p.DenyOut) == 0)
}
