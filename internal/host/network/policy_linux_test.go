package network

import (
	"context"
	"errors"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// chainExists reports whether iptables has chain in table.
func chainExists(table, chain string) bool {
	return exec.Command("iptables", "-w", "-t", table, "-n", "-L", chain).Run() == nil
}

// TestPolicy: a sandbox's policy applies at once, blocked connects are
// refused (not dropped: the error is ECONNREFUSED, whatever the timeout),
// allow wins over deny, and the chains go with the policy or the endpoint.
func TestPolicy(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, true)
	// Registered before the manager's cleanup, so it runs after Teardown:
	// a policy still installed then is removed with everything else.
	var kept []string
	t.Cleanup(func() {
		for _, c := range kept {
			if chainExists("filter", c) || chainExists("nat", c) {
				t.Errorf("chain %s outlives Teardown", c)
			}
		}
	})
	m := newTestManager(t, cfg)
	ctx := context.Background()
	target, _ := outsideHost(t)
	dst := netip.MustParseAddrPort(target).Addr()
	id := "sbx_p_" + randHex(t, 8)
	ep, err := m.Attach(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	hash := strings.TrimPrefix(ep.HostVeth, vethPrefix)
	fc, nc := policyChains(hash)
	one := netip.PrefixFrom(dst, 32)
	other := netip.MustParsePrefix("203.0.113.0/24")
	for _, tc := range []struct {
		name    string
		p       Policy
		refused bool
	}{
		{"default", Policy{}, false},
		{"egress deny", Policy{Deny: true}, true},
		{"deny, target allowed", Policy{Deny: true, AllowCIDRs: []netip.Prefix{one}}, false},
		{"deny, other allowed", Policy{Deny: true, AllowCIDRs: []netip.Prefix{other}}, true},
		{"deny_out target", Policy{DenyCIDRs: []netip.Prefix{one}}, true},
		{"allow wins over deny_out", Policy{DenyCIDRs: []netip.Prefix{netip.PrefixFrom(dst, 8).Masked()}, AllowCIDRs: []netip.Prefix{one}}, false},
		{"deny_out other", Policy{DenyCIDRs: []netip.Prefix{other}}, false},
	} {
		if err := m.SetPolicy(ctx, id, tc.p); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, err := dial(t, ep.NetNSPath, target, 10*time.Second)
		switch {
		case tc.refused && !errors.Is(err, syscall.ECONNREFUSED):
			t.Errorf("%s: dial err %v, want connection refused", tc.name, err)
		case !tc.refused && err != nil:
			t.Errorf("%s: dial err %v, want a connection", tc.name, err)
		}
		if got := chainExists("filter", fc); got != !tc.p.IsZero() {
			t.Errorf("%s: filter chain exists = %v", tc.name, got)
		}
	}
	if err := m.SetPolicy(ctx, id, Policy{Deny: true}); err != nil {
		t.Fatal(err)
	}
	if err := m.Detach(ctx, id); err != nil {
		t.Fatal(err)
	}
	if chainExists("filter", fc) || chainExists("nat", nc) {
		t.Errorf("policy chains outlive Detach")
	}
	if err := m.SetPolicy(ctx, id, Policy{Deny: true}); err == nil {
		t.Errorf("SetPolicy of a detached sandbox succeeded")
	}
	id2 := "sbx_p_" + randHex(t, 8)
	ep2, err := m.Attach(ctx, id2)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetPolicy(ctx, id2, Policy{Deny: true, Proxy: true}); err != nil {
		t.Fatal(err)
	}
	fc2, nc2 := policyChains(strings.TrimPrefix(ep2.HostVeth, vethPrefix))
	kept = append(kept, fc2, nc2)
}

// TestPolicySurvivesRestart: a new manager (ptd restarted) finds the
// policies in place and can change and remove them.
func TestPolicySurvivesRestart(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, true)
	m := newTestManager(t, cfg)
	ctx := context.Background()
	target, _ := outsideHost(t)
	id := "sbx_r_" + randHex(t, 8)
	ep, err := m.Attach(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetPolicy(ctx, id, Policy{Deny: true}); err != nil {
		t.Fatal(err)
	}
	m2, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(t, ep.NetNSPath, target, 10*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("after a restart: dial err %v, want the policy still refusing", err)
	}
	if err := m2.SetPolicy(ctx, id, Policy{}); err != nil {
		t.Fatal(err)
	}
	fc, _ := policyChains(strings.TrimPrefix(ep.HostVeth, vethPrefix))
	if chainExists("filter", fc) {
		t.Errorf("the restarted manager did not remove the policy chains")
	}
	if _, err := dial(t, ep.NetNSPath, target, 10*time.Second); err != nil {
		t.Errorf("after removing the policy: %v", err)
	}
}
