package network

import (
	"context"
	"fmt"
	"strings"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// SetPolicy applies p to sandbox id's traffic at once: its policy chains
// are rewritten in one iptables-restore transaction (no moment without
// rules), then hooked into the bridge's dispatch chains by the sandbox's
// address. A zero Policy removes the chains. The sandbox must be attached.
//
// It returns an error wrapping sandbox.ErrNotFound when id has no endpoint.
func (m *Manager) SetPolicy(ctx context.Context, id string, p Policy) error {
	if err := validID(id); err != nil {
		return err
	}
	unlock := m.idLocks.lock(id)
	defer unlock()
	ep, ok := m.Endpoint(id)
	if !ok {
		return fmt.Errorf("policy %s: no endpoint: %w", id, sandbox.ErrNotFound)
	}
	hash := strings.TrimPrefix(ep.HostVeth, vethPrefix)
	if p.IsZero() {
		return m.removePolicy(ctx, hash)
	}
	if _, err := runIptables(ctx, strings.NewReader(m.policyRules(hash, p)), "iptables-restore", "-w", "--noflush"); err != nil {
		return fmt.Errorf("policy %s: %w", id, err)
	}
	fc, nc := policyChains(hash)
	egr, pre := m.policyDispatch()
	src := ep.Addr.String() + "/32"
	for _, d := range []struct{ table, chain, target string }{{"filter", egr, fc}, {"nat", pre, nc}} {
		rule := []string{"-s", src, "-j", d.target}
		if _, err := runIptables(ctx, nil, "iptables", append([]string{"-w", "-t", d.table, "-C", d.chain}, rule...)...); err == nil {
			continue
		}
		if _, err := runIptables(ctx, nil, "iptables", append([]string{"-w", "-t", d.table, "-A", d.chain}, rule...)...); err != nil {
			return fmt.Errorf("policy %s: %w", id, err)
		}
	}
	return nil
}

// removePolicy unhooks and deletes one sandbox's policy chains; missing
// ones are fine.
func (m *Manager) removePolicy(ctx context.Context, hash string) error {
	fc, nc := policyChains(hash)
	egr, pre := m.policyDispatch()
	for _, d := range []struct{ table, chain, target string }{{"filter", egr, fc}, {"nat", pre, nc}} {
		if err := deleteJumps(ctx, d.table, d.chain, d.target); err != nil {
			return err
		}
		if err := deleteChain(ctx, d.table, d.target); err != nil {
			return err
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

// deleteJumps removes every rule of chain that jumps to target.
func deleteJumps(ctx context.Context, table, chain, target string) error {
	out, err := runIptables(ctx, nil, "iptables", "-w", "-t", table, "-S", chain)
	if err != nil {
		return nil // no dispatch chain: nothing hooked
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "-A" || f[len(f)-1] != target || f[len(f)-2] != "-j" {
			continue
		}
		if _, err := runIptables(ctx, nil, "iptables", append([]string{"-w", "-t", table, "-D"}, f[1:]...)...); err != nil {
			return fmt.Errorf("policy: unhook %s: %w", target, err)
		}
	}
	return nil
}

// deleteChain flushes and deletes a chain; a missing one is fine.
func deleteChain(ctx context.Context, table, chain string) error {
	if _, err := runIptables(ctx, nil, "iptables", "-w", "-t", table, "-n", "-L", chain); err != nil {
		return nil
	}
	if _, err := runIptables(ctx, nil, "iptables", "-w", "-t", table, "-F", chain); err != nil {
		return fmt.Errorf("policy: flush %s: %w", chain, err)
	}
	if _, err := runIptables(ctx, nil, "iptables", "-w", "-t", table, "-X", chain); err != nil {
		return fmt.Errorf("policy: delete %s: %w", chain, err)
	}
	return nil
}
