package crash

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// outsideBanner makes a network namespace reached from the host over a
// veth pair (ptdtest.Outside), with one address serving "hi" on TCP port 9000: a
// destination a sandbox's policy can allow or block. Everything is
// removed in t.Cleanup.
func outsideBanner(t *testing.T) netip.Addr {
	t.Helper()
	o := ptdtest.NewOutside(t, "ptc", 1)
	o.Serve(t, "0.0.0.0:9000", func(c net.Conn) { fmt.Fprintln(c, "hi") })
	return o.Addrs[0]
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
