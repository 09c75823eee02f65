package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxNetwork is `pt sandbox network ID [--egress allow|deny]
// [--allow-out X]... [--deny-out CIDR]...`: replace a sandbox's network
// policy. It replaces the whole policy, so a call with no flags restores
// the default (egress allowed, no lists).
type sandboxNetwork struct{ app *app }

const sandboxNetworkSynopsis = "pt sandbox network ID [--egress allow|deny] [--allow-out CIDR|DOMAIN]... [--deny-out CIDR]... [--json]\n\n" +
	"  Replace a sandbox's network policy (with no flags: back to the default, egress allowed).\n" +
	"  allow-out wins over deny-out; domains (api.example.com, *.example.com) cover HTTP and\n" +
	"  HTTPS on ports 80 and 443. A running sandbox follows the new policy at once."

// bind binds the flags; the returned run sends the policy and prints it and
// when it applies.
func (c *sandboxNetwork) bind(fs *flag.FlagSet) runFunc {
	var (
		allow, deny listFlag
		egress      string
		asJSON      bool
	)
	fs.StringVar(&egress, "egress", "allow", "`allow` or deny: what happens to traffic no list matches")
	fs.Var(&allow, "allow-out", "allow an IPv4 `CIDR`, address or domain (repeatable, or comma-separated)")
	fs.Var(&deny, "deny-out", "deny an IPv4 `CIDR` or address (repeatable, or comma-separated)")
	fs.BoolVar(&asJSON, "json", false, `print {"id", "state", "network", "applies"} as JSON`)
	return callRun(c.app, oneSandboxID, func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.NetworkResult, error) {
		return cl.Sandboxes.SetNetwork(ctx, pos[0], platinum.NetworkPolicy{Egress: egress, AllowOut: splitList(allow), DenyOut: splitList(deny)})
	}, jsonOr(c.app, &asJSON, func(res *platinum.NetworkResult) error {
		n := res.Network
		fmt.Fprintf(c.app.stdout, "egress: %s\nallow out: %s\ndeny out: %s\napplies: %s\n",
			n.Egress, orDash(strings.Join(n.AllowOut, ", ")), orDash(strings.Join(n.DenyOut, ", ")), res.Applies)
		if res.Applies == platinum.NetworkAppliesNextStart {
			fmt.Fprintf(c.app.stderr, "the sandbox is %s; the policy applies when it next starts\n", res.State)
		}
		return nil
	}))
}

// splitList flattens repeated and comma-separated values.
func splitList(vs []string) []string {
	out := []string{}
	for _, v := range vs {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
