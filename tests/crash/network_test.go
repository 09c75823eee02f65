package crash

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// outsideBanner makes a network namespace reached from the host over a
// veth pair, with one address serving "hi" on TCP port 9000: a
// destination a sandbox's policy can allow or block. Everything is
// removed in t.Cleanup.
func outsideBanner(t *testing.T) netip.Addr {
	t.Helper()
	suffix := ptdtest.RandHex(3)
	ns, veth := "ptc-out-"+suffix, "ptc"+suffix
	r, _ := rand.Int(rand.Reader, big.NewInt(1<<13))
	base := netip.AddrFrom4([4]byte{198, 18 + byte(r.Int64()>>12), byte(r.Int64() >> 4 & 0xff), byte(r.Int64() & 0xf << 4)})
	hostAddr := base.Next()
	addr := hostAddr.Next()
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", veth).Run()
		exec.Command("ip", "netns", "del", ns).Run()
	})
	run("netns", "add", ns)
	run("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
	run("addr", "add", hostAddr.String()+"/28", "dev", veth)
	run("link", "set", veth, "up")
	run("-n", ns, "link", "set", "lo", "up")
	run("-n", ns, "link", "set", "eth0", "up")
	run("-n", ns, "addr", "add", addr.String()+"/28", "dev", "eth0")
	run("-n", ns, "route", "add", "default", "via", hostAddr.String())

	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result)
	go func() {
		// This thread enters the namespace: it dies with the goroutine.
		runtime.LockOSThread()
		h, err := netns.GetFromName(ns)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			ch <- result{err: err}
			return
		}
		ln, err := net.Listen("tcp4", "0.0.0.0:9000")
		ch <- result{ln, err}
	}()
	res := <-ch
	if res.err != nil {
		t.Fatalf("listen in %s: %v", ns, res.err)
	}
	t.Cleanup(func() { res.ln.Close() })
	go func() {
		for {
			c, err := res.ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "hi")
			c.Close()
		}
	}()
	return addr
}

// TestKillDuringNetworkPatch kills ptd after a PATCH /network stored the
// new policy but before the host applied it: after the restart the
// running sandbox's firewall matches the stored policy, in both
// directions (a block and a lift).
func TestKillDuringNetworkPatch(t *testing.T) {
	d, a := startDaemon(t)
	target := outsideBanner(t)
	st, m := a.do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": "busybox", "disk_gb": 1})
	if st != 201 {
		t.Fatalf("create: %d %v", st, m)
	}
	id := m["id"].(string)
	t.Cleanup(func() { a.try("DELETE", "/v1/sandboxes/"+id, nil, nil) })
	reach := func() bool {
		_, m := a.do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": fmt.Sprintf("nc -w 3 %s 9000 </dev/null", target)})
		return m["exit_code"] == 0.0 && strings.Contains(fmt.Sprint(m["stdout"]), "hi")
	}
	if !reach() {
		t.Fatalf("the sandbox cannot reach %s:9000 with the default policy", target)
	}
	for _, c := range []struct {
		policy map[string]any
		reach  bool
	}{
		{map[string]any{"egress": "allow", "deny_out": []string{target.String() + "/32"}}, false},
		{map[string]any{}, true},
	} {
		armCrash(t, d, "network.stored")
		a.waitState(id, "running", 60*time.Second)
		if st, m, err := a.try("PATCH", "/v1/sandboxes/"+id+"/network", c.policy, nil); err == nil {
			t.Fatalf("PATCH %v answered %d %v; ptd should have died", c.policy, st, m)
		}
		crashed(t, d, "network.stored")
		_, sb := a.do("GET", "/v1/sandboxes/"+id, nil)
		if deny := fmt.Sprint(sb["network"]); strings.Contains(deny, target.String()) != !c.reach {
			t.Fatalf("stored network after the crash: %v, want the patched %v", sb["network"], c.policy)
		}
		eventually(t, 30*time.Second, func() string {
			if reach() != c.reach {
				return fmt.Sprintf("policy %v: reach %s = %v after the restart, want %v", c.policy, target, !c.reach, c.reach)
			}
			return ""
		})
	}
}
