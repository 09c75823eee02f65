package platinum

import (
	"context"
)

// Egress values of a NetworkPolicy.
const (
	EgressAllow = "allow"
	EgressDeny  = "deny"
)

// NetworkPolicy is a sandbox's outbound network policy. The zero value is
// the default: egress allowed, no lists. AllowOut wins over DenyOut.
// Whatever the policy, a sandbox reaches no other sandbox, no host port
// but the API on its gateway, and no link-local address; a blocked
// connection fails at once (refused or reset), it never hangs.
type NetworkPolicy struct {
	// Egress is EgressAllow (default) or EgressDeny: what happens to
	// traffic no list matches.
	Egress string `json:"egress,omitempty"`
	// AllowOut lists IPv4 CIDRs or addresses, and domain names (exact, or
	// "*.suffix"); domain rules cover HTTP and HTTPS on ports 80 and 443
	// (Host header, TLS SNI) and, under EgressDeny, DNS answers.
	AllowOut []string `json:"allow_out"`
	// DenyOut lists IPv4 CIDRs or addresses.
	DenyOut []string `json:"deny_out"`
}

// Secret is a secret given at create. Inside the sandbox its variable
// holds only a placeholder (pt_secret_…); the host's egress proxy puts the
// value in requests to Hosts (all hosts when empty): headers and query
// string, and the body when Body is set. For HTTPS the sandbox trusts a CA
// of its own that the proxy signs with; the upstream is verified normally.
type Secret struct {
	Value string   `json:"value"`
	Hosts []string `json:"hosts,omitempty"`
	Body  bool     `json:"body,omitempty"`
}

// NetworkApplies says when a policy change reaches the sandbox.
type NetworkApplies string

// When a network policy change applies.
const (
	// NetworkAppliesNow: the running sandbox's new connections follow it
	// already.
	NetworkAppliesNow NetworkApplies = "now"
	// NetworkAppliesNextStart: the sandbox is not running; its next start
	// applies it.
	NetworkAppliesNextStart NetworkApplies = "next_start"
)

// NetworkResult is the answer to SetNetwork.
type NetworkResult struct {
	ID      string         `json:"id"`
	State   State          `json:"state"`
	Network NetworkPolicy  `json:"network"`
	Applies NetworkApplies `json:"applies"`
}

// SetNetwork replaces the sandbox's network policy (the whole policy: a
// zero NetworkPolicy restores the default). On a running sandbox it
// applies before the call returns. A bad entry is an APIError with code
// invalid_request; nothing changes then.
func (s *SandboxesService) SetNetwork(ctx context.Context, id string, p NetworkPolicy) (*NetworkResult, error) {
	if p.AllowOut == nil {
		p.AllowOut = []string{}
	}
	if p.DenyOut == nil {
		p.DenyOut = []string{}
	}
	return fetchJSON[NetworkResult](ctx, s.c, "PATCH", sandboxPath(id)+"/network", nil, p, "set network of sandbox %s", id)
}
