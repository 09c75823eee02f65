package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// patchNetwork replaces a sandbox's policy and checks it applied at once.
func patchNetwork(t *testing.T, c *client, id string, policy map[string]any) {
	t.Helper()
	r := c.do("PATCH", "/v1/sandboxes/"+id+"/network", policy)
	if r.Status != 200 {
		t.Fatalf("patch network: %d %s", r.Status, r.Body)
	}
	if got := r.JSON()["applies"]; got != "now" {
		t.Fatalf("patch network of a running sandbox: applies %v, want now: %s", got, r.Body)
	}
}

// wantProbe runs netprobe and checks its verdict's first word.
func wantProbe(t *testing.T, c *client, id, want string, args ...string) {
	t.Helper()
	got := probe(t, c, id, args...)
	if f := strings.Fields(got); len(f) == 0 || f[0] != want {
		t.Errorf("netprobe %s: %q, want %s", strings.Join(args, " "), got, want)
	}
}

// TestNetworkPolicyIPRules covers egress deny, allow_out and deny_out
// CIDRs, allow_out winning over deny_out, and PATCH on a running sandbox
// taking effect at once. A blocked connect is refused (TCP reset), never a
// timeout. It runs on runc and gVisor: both sit behind the same veth.
func TestNetworkPolicyIPRules(t *testing.T) {
	c := newClient(t)
	out := newOutside(t, 3)
	a, b, cc := out.Addrs[0], out.Addrs[1], out.Addrs[2]
	port := func(x netip.Addr) string { return net.JoinHostPort(x.String(), "9000") }
	runtimes := []string{"runc"}
	if hasRuntime(t, c, "gvisor") {
		runtimes = append(runtimes, "gvisor")
	}
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			id := c.create(map[string]any{"template": "busybox", "runtime": rt,
				"network": map[string]any{"egress": "deny", "allow_out": []string{a.String() + "/32"}}})
			installNetprobe(t, c, id)
			r := c.do("GET", "/v1/sandboxes/"+id, nil)
			var view struct {
				Network struct {
					Egress   string   `json:"egress"`
					AllowOut []string `json:"allow_out"`
					DenyOut  []string `json:"deny_out"`
				} `json:"network"`
			}
			json.Unmarshal(r.Body, &view)
			if view.Network.Egress != "deny" || !cmp.Equal(view.Network.AllowOut, []string{a.String() + "/32"}) {
				t.Errorf("record's network: %s", r.Body)
			}

			// egress deny + allow_out CIDR
			wantProbe(t, c, id, "ok", "dial", port(a))
			wantProbe(t, c, id, "refused", "dial", port(b))

			// deny_out, with allow_out winning for an address in both (the
			// CLI this time)
			stdout, stderr, code := pt(t, nil, "sandbox", "network", id, "--egress", "allow",
				"--deny-out", b.String()+"/32,"+cc.String()+"/31", "--allow-out", cc.String())
			if code != 0 || !strings.Contains(stdout, "applies: now") || !strings.Contains(stdout, "deny out: "+b.String()+"/32") {
				t.Fatalf("pt sandbox network: %d %s %s", code, stdout, stderr)
			}
			wantProbe(t, c, id, "ok", "dial", port(a))
			wantProbe(t, c, id, "refused", "dial", port(b))
			wantProbe(t, c, id, "ok", "dial", port(cc))

			// back to the default (the SDK): everything reachable again
			res, err := platinum.New(env.url, env.token).Sandboxes.SetNetwork(context.Background(), id, platinum.NetworkPolicy{})
			if err != nil || res.Applies != platinum.NetworkAppliesNow || res.Network.Egress != "allow" {
				t.Fatalf("SDK SetNetwork: %+v %v", res, err)
			}
			wantProbe(t, c, id, "ok", "dial", port(b))

			// deny all
			patchNetwork(t, c, id, map[string]any{"egress": "deny"})
			wantProbe(t, c, id, "refused", "dial", port(a))

			// A bad policy is refused and changes nothing.
			if r := c.do("PATCH", "/v1/sandboxes/"+id+"/network", map[string]any{"deny_out": []string{"example.com"}}); r.Status != 400 || !strings.Contains(string(r.Body), "deny_out") {
				t.Errorf("bad policy: %d %s", r.Status, r.Body)
			}
			if _, _, code := pt(t, nil, "sandbox", "network", id, "--egress", "sometimes"); code == 0 {
				t.Errorf("pt sandbox network --egress sometimes succeeded")
			}
			wantProbe(t, c, id, "refused", "dial", port(a))

			// Stopped: stored, applied by the next start.
			if r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); r.Status != 200 {
				t.Fatalf("stop: %d %s", r.Status, r.Body)
			}
			r = c.do("PATCH", "/v1/sandboxes/"+id+"/network", map[string]any{"egress": "deny", "allow_out": []string{b.String()}})
			if r.Status != 200 || r.JSON()["applies"] != "next_start" {
				t.Fatalf("patch a stopped sandbox: %d %s", r.Status, r.Body)
			}
			if r := c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil); r.Status != 200 {
				t.Fatalf("start: %d %s", r.Status, r.Body)
			}
			wantProbe(t, c, id, "ok", "dial", port(b))
			wantProbe(t, c, id, "refused", "dial", port(a))
		})
	}
}

// hasRuntime reports whether ptd runs the runtime class.
func hasRuntime(t *testing.T, c *client, class string) bool {
	r := c.do("GET", "/v1/hosts", nil)
	return strings.Contains(string(r.Body), `"`+class+`"`)
}

// TestNetworkPolicyInvariants: even with egress allowed and allow_out
// 0.0.0.0/0, a sandbox reaches no other sandbox, no host port but the API
// on its gateway, and no link-local address; each fails at once.
func TestNetworkPolicyInvariants(t *testing.T) {
	c := newClient(t)
	out := newOutside(t, 1)
	wide := map[string]any{"egress": "allow", "allow_out": []string{"0.0.0.0/0"}}
	id := c.create(map[string]any{"template": "busybox", "network": wide})
	other := c.create(map[string]any{"template": "busybox"})
	installNetprobe(t, c, id)
	otherAddr, _ := sandboxAddr(t, c, other)
	_, gw := sandboxAddr(t, c, id)
	c.mustSh(other, "nc -ll -p 8080 -e echo hi </dev/null >/dev/null 2>&1 &")

	// A host listener on every address.
	hostPort := hostListener(t, "tcp4")
	hostOutside := out.Addrs[0].Prev() // the host's end of the outside veth
	_, apiPort, _ := net.SplitHostPort(strings.TrimPrefix(env.url, "http://"))

	check := func(t *testing.T) {
		wantProbe(t, c, id, "ok", "dial", net.JoinHostPort(out.Addrs[0].String(), "9000"))
		wantProbe(t, c, id, "refused", "dial", net.JoinHostPort(otherAddr, "8080"))
		wantProbe(t, c, id, "refused", "dial", net.JoinHostPort(otherAddr, "49983"))
		wantProbe(t, c, id, "refused", "dial", net.JoinHostPort(gw, strconv.Itoa(hostPort)))
		wantProbe(t, c, id, "refused", "dial", net.JoinHostPort(hostOutside.String(), strconv.Itoa(hostPort)))
		wantProbe(t, c, id, "refused", "dial", "169.254.169.254:80")
		wantProbe(t, c, id, "refused", "dial", "169.254.169.254:9000")
		// The egress proxy and DNS filter take only redirected traffic.
		wantProbe(t, c, id, "refused", "dial", net.JoinHostPort(gw, "15001"))
		wantProbe(t, c, id, "refused", "dial", net.JoinHostPort(gw, "15053"))
		// The API on the gateway stays reachable (it answers HTTP, not a
		// banner: the connection opens and the read times out or ends).
		if got := probe(t, c, id, "get", "http://"+net.JoinHostPort(gw, apiPort)+"/healthz"); !strings.HasPrefix(got, "ok 200") {
			t.Errorf("API on the gateway: %q", got)
		}
	}
	t.Run("allow all", check)
	// The same with the proxy in the path (domain rules redirect 80/443).
	patchNetwork(t, c, id, map[string]any{"egress": "allow", "allow_out": []string{"0.0.0.0/0", "*.example.test"}})
	t.Run("allow all with domain rules", check)
}

// TestNetworkPolicyDomains: with egress denied and a domain allowed, HTTP
// (Host header) and HTTPS (SNI) to the allowed names pass through the
// egress proxy, other names are reset, and DNS answers only allowed names.
func TestNetworkPolicyDomains(t *testing.T) {
	c := newClient(t)
	out := newOutside(t, 1)
	srv := out.Addrs[0]
	sfx := randHex(4)
	allowed, blocked := "api."+sfx+".allowed.test", "evil-"+sfx+".test"
	mapHosts(t, srv, allowed, blocked)
	// Created through the CLI's network flags.
	stdout, stderr, code := pt(t, nil, "sandbox", "create", "-t", "busybox", "--egress", "deny", "--allow-out", "*."+sfx+".allowed.test", "--json")
	if code != 0 {
		t.Fatalf("pt sandbox create: %d %s", code, stderr)
	}
	var created struct {
		ID      string `json:"id"`
		Network struct {
			Egress   string   `json:"egress"`
			AllowOut []string `json:"allow_out"`
		} `json:"network"`
	}
	if err := json.Unmarshal([]byte(stdout), &created); err != nil || created.ID == "" {
		t.Fatalf("pt sandbox create --json: %v %s", err, stdout)
	}
	id := created.ID
	t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
	if created.Network.Egress != "deny" || !cmp.Equal(created.Network.AllowOut, []string{"*." + sfx + ".allowed.test"}) {
		t.Errorf("created network: %s", stdout)
	}
	installNetprobe(t, c, id)

	wantProbe(t, c, id, "ok", "resolve", allowed)
	wantProbe(t, c, id, "notfound", "resolve", blocked)
	if got := probe(t, c, id, "get", "http://"+allowed+"/"); got != "ok 200 hello "+allowed {
		t.Errorf("allowed name over HTTP: %q", got)
	}
	// Name given, address used directly: the Host header decides.
	if got := probe(t, c, id, "get", "http://"+srv.String()+"/"); !strings.HasPrefix(got, "reset") {
		t.Errorf("bare address under egress deny: %q, want reset", got)
	}
	// HTTPS: the SNI decides (the sandbox trusts the test's upstream root
	// here; the proxy splices TLS it does not need to open).
	if r := c.do("PUT", "/v1/sandboxes/"+id+"/files?path=/tmp/upstream-ca.pem", egressFixture.ca.CertPEM); r.Status/100 != 2 {
		t.Fatalf("upload CA: %d %s", r.Status, r.Body)
	}
	if got := probe(t, c, id, "get", "https://"+allowed+"/"); got != "ok 200 hello "+allowed {
		t.Errorf("allowed name over HTTPS: %q", got)
	}
	wantProbe(t, c, id, "ok", "tls", srv.String()+":443", allowed)
	// A blocked name fails at DNS; reached by its address with the name in
	// SNI, the proxy resets the handshake.
	wantProbe(t, c, id, "reset", "tls", srv.String()+":443", blocked)
	wantProbe(t, c, id, "reset", "tls", srv.String()+":443") // no SNI
	// Other ports are not covered by domain rules: refused at connect.
	wantProbe(t, c, id, "refused", "dial", net.JoinHostPort(srv.String(), "9000"))
	for _, r := range out.requests() {
		if strings.Contains(r.Host, "evil") {
			t.Errorf("a blocked name reached the server: %+v", r)
		}
	}
}
