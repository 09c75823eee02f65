package host

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/platinum-dev/platinum/internal/egress"
	"github.com/platinum-dev/platinum/internal/host/network"
	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestEgressRules: what each kind of policy asks of the packet filter
// (redirects only where the proxy has work) and of the proxy.
func TestEgressRules(t *testing.T) {
	h := &Host{cfg: Config{DataDir: t.TempDir()}, egp: egress.New(egress.Config{}, nil)}
	p := netip.MustParsePrefix
	secret := []hostapi.SecretSpec{{Name: "K", Placeholder: "pt_secret_x", Value: "v", Hosts: []string{"api.example.com"}}}
	for _, tc := range []struct {
		name      string
		spec      *hostapi.NetworkSpec
		want      network.Policy
		wantRules bool
	}{
		{"default", nil, network.Policy{}, false},
		{"IP rules only", &hostapi.NetworkSpec{Policy: sandbox.NetworkPolicy{Egress: "allow", AllowOut: []string{"10.0.0.1/32"}, DenyOut: []string{"10.0.0.0/8"}}},
			network.Policy{AllowCIDRs: []netip.Prefix{p("10.0.0.1/32")}, DenyCIDRs: []netip.Prefix{p("10.0.0.0/8")}}, false},
		{"deny", &hostapi.NetworkSpec{Policy: sandbox.NetworkPolicy{Egress: "deny"}},
			network.Policy{Deny: true, DNS: true}, true},
		{"domains", &hostapi.NetworkSpec{Policy: sandbox.NetworkPolicy{Egress: "deny", AllowOut: []string{"*.pypi.org", "10.1.0.0/16"}}},
			network.Policy{Deny: true, AllowCIDRs: []netip.Prefix{p("10.1.0.0/16")}, ProxyAll: true, DNS: true}, true},
		{"secrets", &hostapi.NetworkSpec{Policy: sandbox.NetworkPolicy{Egress: "allow"}, Secrets: secret},
			network.Policy{Proxy: true, DNS: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "sbx_01KABCDEFGHJKMNPQRSTVWXYZ0"
			pol, rules, err := h.egressRules(id, tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, pol, cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
				t.Errorf("filter policy (-want +got):\n%s", diff)
			}
			if (rules != nil) != tc.wantRules {
				t.Errorf("proxy rules = %+v, want some: %v", rules, tc.wantRules)
			}
			if rules != nil && len(rules.Secrets) > 0 && rules.CA == nil {
				t.Errorf("secrets without a CA")
			}
		})
	}
	// The CA is made once and kept out of the sandbox's rootfs, key 0600.
	key := filepath.Join(h.paths("sbx_01KABCDEFGHJKMNPQRSTVWXYZ0").dir, "egress-ca", "ca.key")
	fi, err := os.Stat(key)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("CA key: %v %v", fi, err)
	}
	a, _ := h.egressCA("sbx_01KABCDEFGHJKMNPQRSTVWXYZ0")
	b, _ := h.egressCA("sbx_01KABCDEFGHJKMNPQRSTVWXYZ0")
	if string(a.CertPEM) != string(b.CertPEM) {
		t.Errorf("the CA changed between loads")
	}
}
