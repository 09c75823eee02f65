package network

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// SetPolicy applies p to sandbox id's traffic at once: its policy chains
// are rewritten in one iptables-restore transaction (no moment without
// rules), then hooked into the bridge's dispatch chains by the sandbox's
// address, replacing whatever that address was dispatched to before. A
// zero Policy removes the chains; with none installed it costs nothing.
// The sandbox must be attached.
//
// It returns an error wrapping sandbox.ErrNotFound when id has no endpoint.
func (m *Manager) SetPolicy(ctx context.Context, id string, p Policy) error {
	if err := validID(id); err != nil {
		return err
	}
	unlock := m.idLocks.Lock(id)
	defer unlock()
	ep, ok := m.Endpoint(id)
	if !ok {
		return fmt.Errorf("policy %s: no endpoint: %w", id, sandbox.ErrNotFound)
	}
	hash := strings.TrimPrefix(ep.HostVeth, vethPrefix)
	m.polMu.Lock()
	defer m.polMu.Unlock()
	old, had := m.dispatch[ep.Addr]
	if p.IsZero() {
		if !had {
			return nil
		}
		if err := m.removePolicy(ctx, ep.Addr, old); err != nil {
			return fmt.Errorf("policy %s: %w", id, err)
		}
		return nil
	}
	if _, err := runIptables(ctx, strings.NewReader(m.policyRules(hash, p)), "iptables-restore", "-w", "--noflush"); err != nil {
		return fmt.Errorf("policy %s: %w", id, err)
	}
	if had && old == hash {
		return nil
	}
	if had {
		// Left by a sandbox that had this address before.
		if err := m.removePolicy(ctx, ep.Addr, old); err != nil {
			return fmt.Errorf("policy %s: %w", id, err)
		}
	}
	fc, nc := policyChains(hash)
	egr, pre := m.policyDispatch()
	for _, d := range []struct{ table, chain, target string }{{"filter", egr, fc}, {"nat", pre, nc}} {
		if _, err := runIptables(ctx, nil, "iptables", "-w", "-t", d.table, "-A", d.chain, "-s", ep.Addr.String()+"/32", "-j", d.target); err != nil {
			return fmt.Errorf("policy %s: %w", id, err)
		}
	}
	m.dispatch[ep.Addr] = hash
	return nil
}

// detachPolicy removes the policy of the sandbox at addr, if any. The
// caller holds the sandbox's id lock.
func (m *Manager) detachPolicy(ctx context.Context, addr netip.Addr) error {
	m.polMu.Lock()
	defer m.polMu.Unlock()
	hash, ok := m.dispatch[addr]
	if !ok {
		return nil
	}
	return m.removePolicy(ctx, addr, hash)
}

// removePolicy unhooks addr from hash's chains and deletes them; missing
// rules and chains are fine. The caller holds polMu.
func (m *Manager) removePolicy(ctx context.Context, addr netip.Addr, hash string) error {
	fc, nc := policyChains(hash)
	egr, pre := m.policyDispatch()
	for _, d := range []struct{ table, chain, target string }{{"filter", egr, fc}, {"nat", pre, nc}} {
		// -D of a rule that is not there fails; that is fine.
		runIptables(ctx, nil, "iptables", "-w", "-t", d.table, "-D", d.chain, "-s", addr.String()+"/32", "-j", d.target)
		if err := deleteChain(ctx, d.table, d.target); err != nil {
			return err
		}
	}
	delete(m.dispatch, addr)
	return nil
}

// loadDispatch reads the dispatch rules already installed (a restart), so
// SetPolicy and Detach know what each address is hooked to.
func (m *Manager) loadDispatch(ctx context.Context) error {
	egr, pre := m.policyDispatch()
	m.polMu.Lock()
	defer m.polMu.Unlock()
	for _, d := range []struct{ table, chain, prefix string }{{"filter", egr, "PTE-"}, {"nat", pre, "PTN-"}} {
		out, err := runIptables(ctx, nil, "iptables", "-w", "-t", d.table, "-S", d.chain)
		if err != nil {
			return fmt.Errorf("firewall: %w", err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			// -A <chain> -s <addr>/32 -j <target>
			if len(f) != 6 || f[0] != "-A" || f[2] != "-s" || f[4] != "-j" {
				continue
			}
			p, err := netip.ParsePrefix(f[3])
			hash, ok := strings.CutPrefix(f[5], d.prefix)
			if err != nil || !ok {
				continue
			}
			m.dispatch[p.Addr()] = hash
		}
	}
	return nil
}

// jumpTargets lists the chains chain jumps to.
func jumpTargets(ctx context.Context, table, chain string) ([]string, error) {
	out, err := runIptables(ctx, nil, "iptables", "-w", "-t", table, "-S", chain)
	if err != nil {
		return nil, err
	}
	var targets []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == "-A" && f[len(f)-2] == "-j" {
			targets = append(targets, f[len(f)-1])
		}
	}
	return targets, nil
}

// deleteChain flushes and deletes a chain; a missing one is fine.
func deleteChain(ctx context.Context, table, chain string) error {
	if _, err := runIptables(ctx, nil, "iptables", "-w", "-t", table, "-F", chain); err != nil {
		if strings.Contains(err.Error(), "No chain") || strings.Contains(err.Error(), "does not exist") {
			return nil
		}
		return fmt.Errorf("policy: flush %s: %w", chain, err)
	}
	if _, err := runIptables(ctx, nil, "iptables", "-w", "-t", table, "-X", chain); err != nil {
		return fmt.Errorf("policy: delete %s: %w", chain, err)
	}
	return nil
}
