package network

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// chains returns our chain names; all contain the bridge name so managers
// never share (or delete) each other's rules. iptables allows 28 bytes:
// "PT-" + 15 + "-FWD" = 22.
func (m *Manager) chains() (in, fwd, nat string) {
	b := "PT-" + m.cfg.Bridge
	return b + "-IN", b + "-FWD", b + "-NAT"
}

// policyDispatch names the chains that send each sandbox's traffic to its
// own policy chains (by source address): EGR in filter FORWARD, PRE in nat
// PREROUTING. Setup never flushes them, so policies survive a restart.
func (m *Manager) policyDispatch() (egr, pre string) {
	b := "PT-" + m.cfg.Bridge
	return b + "-EGR", b + "-PRE"
}

// hook is one jump from a built-in chain into ours.
type hook struct {
	table, chain string
	args         []string
}

func (m *Manager) hooks() []hook {
	in, fwd, nat := m.chains()
	_, pre := m.policyDispatch()
	br := m.cfg.Bridge
	return []hook{
		{"filter", "INPUT", []string{"-i", br, "-j", in}},
		{"filter", "FORWARD", []string{"-i", br, "-j", fwd}},
		{"filter", "FORWARD", []string{"-o", br, "-j", fwd}},
		{"nat", "POSTROUTING", []string{"-s", m.cfg.Subnet.String(), "-j", nat}},
		{"nat", "PREROUTING", []string{"-i", br, "-j", pre}},
	}
}

// rules renders the content of our chains for iptables-restore. Declaring a
// chain with --noflush empties it, and the nft backend applies the whole
// input as one transaction, so re-running Setup swaps the rules atomically
// with no moment where the hooks jump into an empty (accept-all) chain.
func (m *Manager) rules() string {
	in, fwd, nat := m.chains()
	br := m.cfg.Bridge
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("*filter")
	w(":%s - [0:0]", in)
	w(":%s - [0:0]", fwd)
	// (a) Sandboxes reach no host port. Replies to connections the host
	// opened (ptd -> pt-agent) must pass.
	w("-A %s -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT", in)
	for _, port := range m.cfg.GatewayPorts {
		w("-A %s -d %s -p tcp --dport %d -j ACCEPT", in, m.gateway, port)
	}
	// The egress proxy and DNS filter take only what a policy redirected
	// to them (conntrack remembers the redirect).
	if m.cfg.ProxyPort != 0 {
		w("-A %s -d %s -p tcp --dport %d -m conntrack --ctstate DNAT -j ACCEPT", in, m.gateway, m.cfg.ProxyPort)
	}
	if m.cfg.DNSPort != 0 {
		for _, proto := range []string{"udp", "tcp"} {
			w("-A %s -d %s -p %s --dport %d -m conntrack --ctstate DNAT -j ACCEPT", in, m.gateway, proto, m.cfg.DNSPort)
		}
	}
	// Everything blocked is rejected, never dropped: a blocked connect
	// fails at once instead of hanging until the client's timeout.
	reject := func(chain, match string) {
		w("-A %s %s-p tcp -j REJECT --reject-with tcp-reset", chain, match)
		w("-A %s %s-j REJECT --reject-with icmp-port-unreachable", chain, match)
	}
	reject(in, "")
	// (b) No sandbox-to-sandbox traffic, even routed through the gateway
	// (bridge ports are also isolated for the switched path).
	reject(fwd, "-i "+br+" -o "+br+" ")
	// Nothing from outside may open a connection into a sandbox.
	w("-A %s -o %s -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT", fwd, br)
	w("-A %s -o %s -j DROP", fwd, br)
	// (c) No link-local (cloud metadata) and no other host address.
	reject(fwd, "-i "+br+" -d 169.254.0.0/16 ")
	reject(fwd, "-i "+br+" -m addrtype --dst-type LOCAL ")
	// (d) Each sandbox's own policy (policy chains, by source address),
	// then the host-wide egress switch.
	egr, _ := m.policyDispatch()
	w("-A %s -i %s -j %s", fwd, br, egr)
	if m.cfg.Egress {
		w("-A %s -i %s -j ACCEPT", fwd, br)
	} else {
		reject(fwd, "-i "+br+" ")
	}
	w("COMMIT")
	w("*nat")
	w(":%s - [0:0]", nat)
	if m.cfg.Egress {
		// Only sandbox traffic: the host's own packets from the gateway
		// address (e.g. to itself over lo) keep their source.
		w("-A %s -s %s ! -o %s -m addrtype ! --src-type LOCAL -j MASQUERADE", nat, m.cfg.Subnet, br)
	}
	w("COMMIT")
	return b.String()
}

// installFirewall writes our chains, then adds any missing hook at the top
// of its built-in chain (so other software's ACCEPT rules cannot pre-empt
// ours).
func (m *Manager) installFirewall(ctx context.Context) error {
	egr, pre := m.policyDispatch()
	for _, c := range []struct{ table, chain string }{{"filter", egr}, {"nat", pre}} {
		if _, err := runIptables(ctx, nil, "iptables", "-w", "-t", c.table, "-n", "-L", c.chain); err == nil {
			continue
		}
		if _, err := runIptables(ctx, nil, "iptables", "-w", "-t", c.table, "-N", c.chain); err != nil {
			return fmt.Errorf("firewall: %w", err)
		}
	}
	if _, err := runIptables(ctx, strings.NewReader(m.rules()), "iptables-restore", "-w", "--noflush"); err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	for _, h := range m.hooks() {
		if m.hookExists(ctx, h) {
			continue
		}
		args := append([]string{"-w", "-t", h.table, "-I", h.chain, "1"}, h.args...)
		if _, err := runIptables(ctx, nil, "iptables", args...); err != nil {
			return fmt.Errorf("firewall: hook %s: %w", h.chain, err)
		}
	}
	return nil
}

func (m *Manager) hookExists(ctx context.Context, h hook) bool {
	args := append([]string{"-w", "-t", h.table, "-C", h.chain}, h.args...)
	_, err := runIptables(ctx, nil, "iptables", args...)
	return err == nil
}

// removeFirewall deletes our hooks and chains; missing ones are fine.
// Hooks are found by their jump target, not rebuilt from the config, so a
// reset with another --subnet than the one that made them still cleans up.
func (m *Manager) removeFirewall(ctx context.Context) error {
	in, fwd, nat := m.chains()
	egr, pre := m.policyDispatch()
	// Per-sandbox policy chains first: they hang off the dispatch chains.
	for _, c := range []struct{ table, chain string }{{"filter", egr}, {"nat", pre}} {
		targets, err := jumpTargets(ctx, c.table, c.chain)
		if err != nil {
			continue // no such chain
		}
		if _, err := runIptables(ctx, nil, "iptables", "-w", "-t", c.table, "-F", c.chain); err != nil {
			return fmt.Errorf("firewall: flush %s: %w", c.chain, err)
		}
		for _, t := range targets {
			if err := deleteChain(ctx, c.table, t); err != nil {
				return err
			}
		}
		m.polMu.Lock()
		clear(m.dispatch)
		m.polMu.Unlock()
	}
	for _, t := range []struct{ table, chain string }{{"filter", "INPUT"}, {"filter", "FORWARD"}, {"nat", "POSTROUTING"}, {"nat", "PREROUTING"}} {
		out, err := runIptables(ctx, nil, "iptables", "-w", "-t", t.table, "-S", t.chain)
		if err != nil {
			return fmt.Errorf("firewall: list %s: %w", t.chain, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 4 || f[0] != "-A" || f[len(f)-2] != "-j" {
				continue
			}
			if target := f[len(f)-1]; target != in && target != fwd && target != nat && target != pre {
				continue
			}
			args := append([]string{"-w", "-t", t.table, "-D"}, f[1:]...)
			if _, err := runIptables(ctx, nil, "iptables", args...); err != nil {
				return fmt.Errorf("firewall: unhook %s: %w", t.chain, err)
			}
		}
	}
	for _, c := range []struct{ table, chain string }{{"filter", in}, {"filter", fwd}, {"nat", nat}, {"filter", egr}, {"nat", pre}} {
		if _, err := runIptables(ctx, nil, "iptables", "-w", "-t", c.table, "-n", "-L", c.chain); err != nil {
			continue // no such chain
		}
		if _, err := runIptables(ctx, nil, "iptables", "-w", "-t", c.table, "-F", c.chain); err != nil {
			return fmt.Errorf("firewall: flush %s: %w", c.chain, err)
		}
		if _, err := runIptables(ctx, nil, "iptables", "-w", "-t", c.table, "-X", c.chain); err != nil {
			return fmt.Errorf("firewall: delete %s: %w", c.chain, err)
		}
	}
	return nil
}

func runIptables(ctx context.Context, stdin *strings.Reader, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
	}
	return out.Bytes(), nil
}
