package host

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/platinum-dev/platinum/internal/egress"
	"github.com/platinum-dev/platinum/internal/host/network"
	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// EgressConfig configures the host's egress proxy and DNS filter
// (internal/egress), which enforce domain rules and inject secrets.
type EgressConfig struct {
	// ProxyPort and DNSPort are where they listen on the bridge gateway;
	// ProxyPort 0 turns both off (domain rules and secret injection then
	// do nothing; IP rules still hold).
	ProxyPort, DNSPort uint16
	// UpstreamCAFile adds PEM roots to the system's for verifying upstream
	// servers when the proxy terminates TLS (tests' own CA).
	UpstreamCAFile string
	// HostsFile maps names to addresses before the host's resolver
	// ("address name…" lines), for the DNS filter and name checks.
	HostsFile string
}

// DefaultEgressConfig returns the production defaults.
func DefaultEgressConfig() EgressConfig {
	return EgressConfig{ProxyPort: 15001, DNSPort: 15053}
}

// openEgress starts the proxy on the gateway.
func (h *Host) openEgress(ctx context.Context) error {
	c := h.cfg.Egress
	if c.ProxyPort == 0 {
		return nil
	}
	gw := h.net.Gateway()
	cfg := egress.Config{
		Listen:   netip.AddrPortFrom(gw, c.ProxyPort),
		Resolver: &egress.Resolver{HostsFile: c.HostsFile},
		Forbidden: func(a netip.Addr) bool {
			// The packet filter keeps these away; the proxy, which dials
			// from the host itself, must not reopen them.
			return !a.Is4() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() ||
				h.cfg.Network.Subnet.Contains(a) || isLocalAddr(a)
		},
	}
	if c.DNSPort != 0 {
		cfg.DNSListen = netip.AddrPortFrom(gw, c.DNSPort)
	}
	if c.UpstreamCAFile != "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		b, err := os.ReadFile(c.UpstreamCAFile)
		if err != nil {
			return fmt.Errorf("host: egress upstream CA: %w", err)
		}
		if !pool.AppendCertsFromPEM(b) {
			return fmt.Errorf("host: egress upstream CA %s: no certificate", c.UpstreamCAFile)
		}
		cfg.UpstreamRoots = pool
	}
	h.egp = egress.New(cfg, h.log)
	if err := h.egp.Start(ctx); err != nil {
		h.egp = nil
		return fmt.Errorf("host: %w", err)
	}
	return nil
}

// SetNetwork implements hostapi.NetworkSetter: the sandbox's packet
// filter rules and proxy rules change at once. A spec with secrets given
// to a sandbox that booted without any (a warm pool's sandbox claimed by a
// create with secrets, docs/sessions.md "Warm creates") also gets the
// trust bundle a boot with them installs, before the rules.
func (h *Host) SetNetwork(ctx context.Context, id string, spec *hostapi.NetworkSpec) error {
	ep, ok := h.net.Endpoint(id)
	if !ok {
		return fmt.Errorf("host: network of %s: %w", id, sandbox.ErrNotFound)
	}
	if err := h.trustEgressCA(ctx, id, spec); err != nil {
		return err
	}
	return h.applyNetwork(ctx, id, ep, spec)
}

// applyNetwork installs spec for the sandbox at ep: proxy rules first (so
// nothing redirected finds the proxy without them), then the filter.
func (h *Host) applyNetwork(ctx context.Context, id string, ep network.Endpoint, spec *hostapi.NetworkSpec) error {
	pol, rules, err := h.egressRules(id, spec)
	if err != nil {
		return err
	}
	if h.egp != nil {
		h.egp.Set(ep.Addr, rules)
	}
	if err := h.net.SetPolicy(ctx, id, pol); err != nil {
		return fmt.Errorf("host: %w", err)
	}
	return nil
}

// egressRules translates a spec into the filter's Policy and the proxy's
// Rules (nil when the proxy has nothing to do for the sandbox).
func (h *Host) egressRules(id string, spec *hostapi.NetworkSpec) (network.Policy, *egress.Rules, error) {
	if spec == nil {
		return network.Policy{}, nil, nil
	}
	r := &egress.Rules{Deny: spec.Policy.Egress == sandbox.EgressDeny}
	for _, e := range spec.Policy.AllowOut {
		if p, err := netip.ParsePrefix(e); err == nil {
			r.AllowCIDRs = append(r.AllowCIDRs, p)
		} else {
			r.AllowDomains = append(r.AllowDomains, e)
		}
	}
	for _, e := range spec.Policy.DenyOut {
		if p, err := netip.ParsePrefix(e); err == nil {
			r.DenyCIDRs = append(r.DenyCIDRs, p)
		}
	}
	for _, s := range spec.Secrets {
		r.Secrets = append(r.Secrets, egress.Secret{Placeholder: s.Placeholder, Value: s.Value, Hosts: s.Hosts, Body: s.Body})
	}
	if len(r.Secrets) > 0 {
		ca, err := h.egressCA(id)
		if err != nil {
			return network.Policy{}, nil, err
		}
		r.CA = ca
	}
	pol := network.Policy{Deny: r.Deny, AllowCIDRs: r.AllowCIDRs, DenyCIDRs: r.DenyCIDRs}
	if h.egp != nil {
		pol.ProxyAll = len(r.AllowDomains) > 0
		pol.Proxy = len(r.Secrets) > 0
		// With the proxy in the path, names resolve through the same
		// resolver that checks them (and under deny, only allowed ones).
		pol.DNS = r.Deny || pol.ProxyAll || pol.Proxy
	}
	if !pol.Proxy && !pol.ProxyAll && !pol.DNS {
		r = nil
	}
	return pol, r, nil
}

// egressCA returns the sandbox's CA, creating it on first use. The key
// stays in the sandbox's host directory, outside anything the sandbox
// mounts.
func (h *Host) egressCA(id string) (*egress.CA, error) {
	dir := filepath.Join(h.paths(id).dir, "egress-ca")
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	cb, cerr := os.ReadFile(certPath)
	kb, kerr := os.ReadFile(keyPath)
	if cerr == nil && kerr == nil {
		return egress.LoadCA(cb, kb)
	}
	if !errors.Is(cerr, os.ErrNotExist) && cerr != nil {
		return nil, fmt.Errorf("host: egress CA: %w", cerr)
	}
	ca, keyPEM, err := egress.NewCA(id)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("host: egress CA: %w", err)
	}
	if err := writeFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(certPath, ca.CertPEM, 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return fmt.Errorf("host: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("host: %w", err)
	}
	return nil
}

// Paths of the trust bundle inside sandboxes (Debian's layout, which most
// TLS libraries read; controlplane points SSL_CERT_FILE and friends here).
const (
	trustBundle = "etc/ssl/certs/ca-certificates.crt"
	trustCA     = "etc/ssl/certs/platinum-egress-ca.pem"
	// trustLocal is where update-ca-certificates looks for local roots,
	// so regenerating the bundle inside the sandbox keeps the CA.
	trustLocal = "usr/local/share/ca-certificates/platinum-egress-ca.crt"
)

// installEgressCA writes the sandbox's trust bundle into its disk's upper
// layer at a cold boot: the template's bundle plus the sandbox's egress
// CA, so clients inside accept the proxy's certificates for hosts that get
// a secret.
func (h *Host) installEgressCA(spec hostapi.StartSpec, p paths) error {
	if spec.Network == nil || len(spec.Network.Secrets) == 0 || h.egp == nil {
		return nil
	}
	return h.writeTrustBundle(spec.ID, spec.RootFS, p.upper)
}

// trustEgressCA installs the sandbox's egress CA in a running sandbox's
// trust bundle when spec has secrets and the sandbox has no CA yet (it
// booted without secrets): written through its mounted root filesystem
// (runc), or by the guest's pt-agent (gVisor, whose guest would not see
// the host's writes), so the guest sees it at once. A sandbox that has the CA (installed at
// boot, or by an earlier call) is left as it is.
func (h *Host) trustEgressCA(ctx context.Context, id string, spec *hostapi.NetworkSpec) error {
	if spec == nil || len(spec.Secrets) == 0 || h.egp == nil {
		return nil
	}
	root := h.paths(id).rootfs
	if !isMounted(root) {
		return nil // not running here: the next boot installs it
	}
	if _, err := os.Stat(filepath.Join(root, trustCA)); err == nil {
		return nil
	}
	if rt := h.runtimeOf(ctx, id); rt.Name() == ClassGVisor {
		// gVisor serves the root filesystem from its own cache and never
		// sees what the host writes under it while it runs: the guest's
		// own pt-agent writes the files (cmd/pt-agent trust).
		p, ok := rt.(privileged)
		if !ok {
			return fmt.Errorf("host: trust bundle: runtime %s cannot exec: %w", rt.Name(), sandbox.ErrUnavailable)
		}
		ca, err := h.egressCA(id)
		if err != nil {
			return err
		}
		if out, err := p.ExecPrivileged(ctx, id, nil, agentPath, "trust", string(ca.CertPEM),
			"/"+trustBundle, "/"+trustCA, "/"+trustLocal); err != nil {
			return fmt.Errorf("host: trust bundle: %w (%s)", err, out)
		}
		return nil
	}
	return h.writeTrustBundle(id, root, root)
}

// writeTrustBundle writes the sandbox's CA, and the trust bundle read
// from base with the CA appended, under root.
func (h *Host) writeTrustBundle(id, base, root string) error {
	ca, err := h.egressCA(id)
	if err != nil {
		return err
	}
	bundle, _ := os.ReadFile(filepath.Join(base, trustBundle))
	if len(bundle) > 0 && bundle[len(bundle)-1] != '\n' {
		bundle = append(bundle, '\n')
	}
	for _, f := range []string{trustCA, trustLocal} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755); err != nil {
			return fmt.Errorf("host: trust bundle: %w", err)
		}
		if err := writeFileAtomic(filepath.Join(root, f), ca.CertPEM, 0o644); err != nil {
			return err
		}
	}
	return writeFileAtomic(filepath.Join(root, trustBundle), append(bundle, ca.CertPEM...), 0o644)
}

// forgetEgress removes the proxy's rules for a sandbox going away.
func (h *Host) forgetEgress(id string) {
	if ep, ok := h.net.Endpoint(id); ok && h.egp != nil {
		h.egp.Set(ep.Addr, nil)
	}
}
