package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/platinum-dev/platinum/internal/crashpoint"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Limits on network policies.
const (
	MaxNetworkRules = 256
)

var domainRE = regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidateNetwork checks a policy and returns it normalised (egress set,
// CIDRs masked, domains lower-case). A nil policy stays nil.
func ValidateNetwork(p *sandbox.NetworkPolicy) (*sandbox.NetworkPolicy, error) {
	if p == nil {
		return nil, nil
	}
	out := &sandbox.NetworkPolicy{Egress: p.Egress, AllowOut: []string{}, DenyOut: []string{}}
	switch p.Egress {
	case "":
		out.Egress = sandbox.EgressAllow
	case sandbox.EgressAllow, sandbox.EgressDeny:
	default:
		return nil, &sandbox.FieldError{Field: "network.egress", Reason: `must be "allow" or "deny"`}
	}
	if len(p.AllowOut) > MaxNetworkRules || len(p.DenyOut) > MaxNetworkRules {
		return nil, &sandbox.FieldError{Field: "network", Reason: fmt.Sprintf("at most %d entries per list", MaxNetworkRules)}
	}
	for _, e := range p.AllowOut {
		if c, ok := parseCIDR(e); ok {
			out.AllowOut = append(out.AllowOut, c.String())
			continue
		}
		d := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(e)), ".")
		if len(d) > 253 || !domainRE.MatchString(d) || !strings.ContainsAny(d, "abcdefghijklmnopqrstuvwxyz") {
			return nil, &sandbox.FieldError{Field: "network.allow_out", Reason: fmt.Sprintf("%q is neither an IPv4 CIDR nor a domain name (exact or *.suffix)", e)}
		}
		out.AllowOut = append(out.AllowOut, d)
	}
	for _, e := range p.DenyOut {
		c, ok := parseCIDR(e)
		if !ok {
			return nil, &sandbox.FieldError{Field: "network.deny_out", Reason: fmt.Sprintf("%q is not an IPv4 CIDR (deny_out takes addresses only)", e)}
		}
		out.DenyOut = append(out.DenyOut, c.String())
	}
	return out, nil
}

// networkForCreate validates a create's policy. A sandbox creating a
// child through its sandbox-scoped token cannot widen its own egress
// through the child: the child gets the parent's policy, and asking for
// another one is refused.
func (s *Service) networkForCreate(ctx context.Context, p Principal, req *sandbox.NetworkPolicy) (*sandbox.NetworkPolicy, error) {
	np, err := ValidateNetwork(req)
	if err != nil || p.SandboxID == "" {
		return np, err
	}
	parent, err := s.store.GetSandbox(ctx, p.OrgID, p.SandboxID)
	if err != nil {
		return nil, fmt.Errorf("parent %q: %w", p.SandboxID, err)
	}
	return childNetwork(parent.Network, np)
}

// childNetwork is the policy of a child asked for by its parent sandbox.
func childNetwork(parent, asked *sandbox.NetworkPolicy) (*sandbox.NetworkPolicy, error) {
	if parent.IsDefault() {
		return asked, nil
	}
	if asked == nil {
		cp := *parent
		return &cp, nil
	}
	if !slices.Equal(asked.AllowOut, parent.AllowOut) || !slices.Equal(asked.DenyOut, parent.DenyOut) || asked.Egress != parent.Egress {
		return nil, &sandbox.FieldError{Field: "network", Reason: "a sandbox's children get its own network policy; it cannot choose another one"}
	}
	return asked, nil
}

// parseCIDR reads an IPv4 CIDR or a bare address (a /32).
func parseCIDR(s string) (netip.Prefix, bool) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
		return p.Masked(), true
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
		return netip.PrefixFrom(a, 32), true
	}
	return netip.Prefix{}, false
}

// networkSpec is what the host needs to enforce sb's network: nil when
// the policy is the default and there is no secret to inject. Secrets that
// cannot be opened are left out (and logged): the sandbox then sends the
// placeholder, never anything else.
func (s *Service) networkSpec(sb sandbox.Sandbox) *NetworkSpec {
	if sb.Network.IsDefault() && len(sb.Secrets) == 0 {
		return nil
	}
	spec := &NetworkSpec{}
	if sb.Network != nil {
		spec.Policy = *sb.Network
	}
	for name, sec := range sb.Secrets {
		if s.cfg.Sealer == nil {
			break
		}
		v, err := s.cfg.Sealer.Open(sec.Sealed, sb.ID+"/"+name)
		if err != nil {
			s.log.Warn("secret cannot be opened; the proxy will not inject it", "sandbox", sb.ID, "secret", name, "err", err)
			continue
		}
		spec.Secrets = append(spec.Secrets, SecretSpec{Name: name, Placeholder: sec.Placeholder, Value: v, Hosts: sec.Hosts, Body: sec.Body})
	}
	return spec
}

// NetworkResult is the answer to a policy change.
type NetworkResult struct {
	Sandbox sandbox.Sandbox
	// Applies is "now" for a running sandbox and "next_start" otherwise.
	Applies string
}

// SetNetwork replaces the sandbox's network policy. On a running sandbox
// the host applies it at once (before this returns); otherwise at the next
// start. A sandbox being deleted is 404; a bad policy changes nothing.
func (s *Service) SetNetwork(ctx context.Context, p Principal, id string, policy *sandbox.NetworkPolicy) (NetworkResult, error) {
	np, err := ValidateNetwork(policy)
	if err != nil {
		return NetworkResult{}, err
	}
	if np == nil {
		np = &sandbox.NetworkPolicy{Egress: sandbox.EgressAllow, AllowOut: []string{}, DenyOut: []string{}}
	}
	// The sandbox's lock orders this against start, stop and delete: a
	// running sandbox stays running until the host has the new rules.
	unlock := s.locks.Lock(id)
	defer unlock()
	for {
		sb, err := s.Get(ctx, p, id, false)
		if err != nil {
			return NetworkResult{}, err
		}
		if !sb.State.Live() {
			return NetworkResult{}, fmt.Errorf("sandbox %q: %w", id, sandbox.ErrNotFound)
		}
		if p.SandboxID != "" {
			parent, err := s.store.GetSandbox(ctx, p.OrgID, p.SandboxID)
			if err != nil {
				return NetworkResult{}, fmt.Errorf("parent %q: %w", p.SandboxID, err)
			}
			if _, err := childNetwork(parent.Network, np); err != nil {
				return NetworkResult{}, err
			}
		}
		sb.Network = np
		out, err := s.update(ctx, sb)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return NetworkResult{}, err
		}
		crashpoint.Hit("network.stored") // stored, not yet on the host
		res := NetworkResult{Sandbox: out, Applies: "next_start"}
		if out.State == sandbox.StateRunning {
			if ns, ok := s.host.(NetworkSetter); ok {
				if err := ns.SetNetwork(ctx, id, s.networkSpec(out)); err != nil {
					return NetworkResult{}, fmt.Errorf("sandbox %q: apply network policy: %w", id, err)
				}
				res.Applies = "now"
			}
		}
		s.event(ctx, out, "network_changed", map[string]any{"egress": np.Egress, "allow_out": len(np.AllowOut), "deny_out": len(np.DenyOut)})
		return res, nil
	}
}

// reapplyNetwork hands a running sandbox's network to its host again
// (after a ptd restart the egress proxy starts empty).
func (s *Service) reapplyNetwork(ctx context.Context, id string) {
	ns, ok := s.host.(NetworkSetter)
	if !ok {
		return
	}
	sb, unlock, ok := s.lockIn(ctx, id, sandbox.StateRunning)
	if !ok {
		return
	}
	defer unlock()
	if err := ns.SetNetwork(ctx, id, s.networkSpec(sb)); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		s.log.WarnContext(ctx, "reapply network policy", "sandbox", id, "err", err)
	}
}

// egressCAEnv points the usual TLS libraries at the trust bundle the host
// installs in sandboxes with secrets (it includes the sandbox's egress CA).
var egressCAEnv = map[string]string{
	"SSL_CERT_FILE":       "/etc/ssl/certs/ca-certificates.crt",
	"REQUESTS_CA_BUNDLE":  "/etc/ssl/certs/ca-certificates.crt",
	"CURL_CA_BUNDLE":      "/etc/ssl/certs/ca-certificates.crt",
	"NODE_EXTRA_CA_CERTS": "/etc/ssl/certs/platinum-egress-ca.pem",
}
