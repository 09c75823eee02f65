package e2b

import "github.com/platinum-dev/platinum/internal/sandbox"

// networkPolicy maps E2B's egress options onto Platinum's policy:
// allow_internet_access: false is egress deny, network.allowOut and
// network.denyOut are allow_out and deny_out (allowOut wins, as in E2B).
// Nil means the default (egress allowed).
func (n *newSandbox) networkPolicy() *sandbox.NetworkPolicy {
	deny := n.AllowInternetAccess != nil && !*n.AllowInternetAccess
	var allow, denyOut []string
	if n.Network != nil {
		allow, denyOut = n.Network.AllowOut, n.Network.DenyOut
	}
	if !deny && len(allow) == 0 && len(denyOut) == 0 {
		return nil
	}
	p := &sandbox.NetworkPolicy{Egress: sandbox.EgressAllow, AllowOut: allow, DenyOut: denyOut}
	if deny {
		p.Egress = sandbox.EgressDeny
	}
	return p
}
