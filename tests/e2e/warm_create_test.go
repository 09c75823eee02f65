package e2e

import (
	"maps"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/testenv"
)

// TestWarmCreateBehavesLikeCold: on each runtime class (runc, the
// harness's default, and gVisor, each from its own class's pool), with a
// warm pool for the template, a plain POST /v1/sandboxes is handed a
// pooled sandbox (start "warm", running at once) that a caller cannot
// tell from one booted for the same body (start "cold") but by those two
// things: the same record fields, the same environment inside, the same
// files. Two warm creates share no hostname, token or file, and the pool
// refills behind them.
func TestWarmCreateBehavesLikeCold(t *testing.T) {
	withEachClassPool(t, 3, warmLikeCold)
}

// withEachClassPool runs f on runc and on gVisor, each with a fresh pool
// of the session template's for that class holding size ready sandboxes.
func withEachClassPool(t *testing.T, size int, f func(t *testing.T, c *client, class string)) {
	c := newClient(t)
	ensureTemplate(t, c, sessionTemplate)
	for _, class := range []string{"runc", "gvisor"} {
		t.Run(class, func(t *testing.T) {
			if class == "gvisor" {
				requireGVisor(t, c)
			}
			drainClassPool(t, c, class)
			setClassPool(t, c, class, size, size)
			waitClassPoolReady(t, c, class, size)
			f(t, c, class)
		})
	}
}

// warmLikeCold is TestWarmCreateBehavesLikeCold on one runtime class; the
// guide's example (no runtime: the default class) runs on runc's.
func warmLikeCold(t *testing.T, c *client, class string) {
	if class == harnessDefaultClass {
		// The guide's example (docs/sessions.md, "Warm creates").
		status, gb := guideCurl(t, guideExample(t, "sessions.md#warm-create"), nil)
		if g := jsonMap(gb); status != 201 || g["start"] != "warm" || g["state"] != "running" {
			t.Fatalf("the guide's warm create: %d %s", status, gb)
		} else {
			t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+g["id"].(string), nil) })
		}
	}

	body := func() map[string]any {
		return map[string]any{"template": sessionTemplate, "runtime": class, "name": "warm-" + randHex(4), "ttl_ms": 600000, "type": "dev",
			"env": map[string]any{"GREETING": "hi there"}, "metadata": map[string]any{"suite": "warm-" + randHex(2)}}
	}
	create := c.createRecord
	wb := body()
	warm := create(wb)
	if warm["start"] != "warm" || warm["runtime"] != class {
		t.Fatalf("create with a ready %s pool: start %v runtime %v, want warm: %v", class, warm["start"], warm["runtime"], warm)
	}
	warm2 := create(body())
	if warm2["start"] != "warm" || warm2["id"] == warm["id"] {
		t.Fatalf("second create: %v %v, want another warm sandbox", warm2["start"], warm2["id"])
	}
	waitClassPoolReady(t, c, class, 1) // refilled behind the claims

	drainClassPool(t, c, class)
	cb := maps.Clone(wb)
	cb["name"] = "cold-" + randHex(4)
	cold := create(cb)
	if cold["start"] != "cold" {
		t.Fatalf("create with no pool: start %v, want cold", cold["start"])
	}

	// The record: everything the caller asked for, the same way.
	for _, k := range []string{"template", "cpu", "ram_mb", "disk_gb", "runtime", "type", "auto_stop_minutes",
		"auto_archive_days", "auto_delete_days", "ttl_ms", "project_id", "auto_resume", "status"} {
		if w, cv := warm[k], cold[k]; !reflect.DeepEqual(w, cv) {
			t.Errorf("%s: warm %v, cold %v", k, w, cv)
		}
	}
	if !reflect.DeepEqual(warm["metadata"], wb["metadata"]) || !reflect.DeepEqual(warm["env_keys"], cold["env_keys"]) || warm["name"] != wb["name"] {
		t.Errorf("warm record: metadata %v env_keys %v name %v; cold env_keys %v", warm["metadata"], warm["env_keys"], warm["name"], cold["env_keys"])
	}

	// Inside: the caller's env, its own hostname and token, nothing the
	// pool added.
	const probe = `echo "$GREETING"; hostname; echo "${PT_TOKEN:+token}"; ls -A /; ls -A ~`
	lines := func(id string) []string { return strings.Split(strings.TrimSpace(c.mustSh(id, probe)), "\n") }
	w, w2, cl := lines(warm["id"].(string)), lines(warm2["id"].(string)), lines(cold["id"].(string))
	if w[0] != "hi there" || w[1] != warm["id"] || w2[1] != warm2["id"] {
		t.Errorf("warm guest: env and hostname %q, %q", w[0:2], w2[0:2])
	}
	if !slices.Equal(w[2:], cl[2:]) || !slices.Equal(w2[2:], cl[2:]) {
		t.Errorf("what a warm guest holds differs from a cold one's:\nwarm %q\ncold %q", w[2:], cl[2:])
	}
	tok := func(id string) string { return c.mustSh(id, `echo "$PT_TOKEN"`) }
	if a, b := tok(warm["id"].(string)), tok(warm2["id"].(string)); a == b {
		t.Errorf("two warm sandboxes share a token")
	}
	c.mustSh(warm["id"].(string), "echo mine > /tmp/claimed")
	if out := c.sh(warm2["id"].(string), "cat /tmp/claimed"); out.ExitCode == 0 {
		t.Errorf("a file of one warm sandbox is in another: %q", out.Stdout)
	}

	// Its events start as a create's: created, and running.
	ev := c.do("GET", "/v1/events?format=json&sandbox_id="+warm["id"].(string), nil)
	if ev.Status != 200 || !strings.Contains(string(ev.Body), `"created"`) || !strings.Contains(string(ev.Body), `"to":"running"`) {
		t.Errorf("warm sandbox's events: %d %s", ev.Status, ev.Body)
	}
	// A list filtered on the caller's metadata finds it; the pool's own
	// marks are gone from it.
	l := c.do("GET", "/v1/sandboxes?metadata[suite]="+wb["metadata"].(map[string]any)["suite"].(string), nil)
	if rows := l.JSON()["rows"]; l.Status != 200 || rows == nil || len(rows.([]any)) != 2 {
		t.Errorf("list by metadata: %d %s", l.Status, l.Body)
	}
}

// TestWarmCreateWithSettingsBehavesLikeCold: on each runtime class (runc,
// the harness's default, and gVisor, each from its own class's pool), a
// create whose body has env, a secret, egress denied with one allow rule,
// metadata, a parent and a disk_gb bigger than the pool's is still served
// warm (docs/sessions.md, "Warm creates"), and the warm sandbox and a cold
// one of the same body pass the same checks: the env and the secret's
// placeholder inside (the agent's and /etc/pt-env) and never its value
// (env, /etc/pt-env, every process's environ and command line, from
// inside and from the host), the secret swapped in over HTTPS to its host
// (the guest trusts its egress CA), other addresses refused and other
// names unresolved, the bigger disk in df, the same record.
func TestWarmCreateWithSettingsBehavesLikeCold(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, sessionTemplate)
	for _, class := range []string{"runc", "gvisor"} {
		t.Run(class, func(t *testing.T) {
			if class == "gvisor" {
				requireGVisor(t, c)
			}
			warmSettingsLikeCold(t, c, class)
		})
	}
}

// requireGVisor skips t unless the test ptd runs the gvisor class (runsc
// on the host; a failure under CI, whose setup installs it).
func requireGVisor(t *testing.T, c *client) {
	t.Helper()
	testenv.Require(t, hasRuntime(t, c, "gvisor"), "requires the gvisor runtime class (runsc): run scripts/setup.sh")
}

// warmSettingsLikeCold is TestWarmCreateWithSettingsBehavesLikeCold on one
// runtime class: its pool serves the warm create; the cold one of the
// same body boots with that pool drained.
func warmSettingsLikeCold(t *testing.T, c *client, class string) {
	drainClassPool(t, c, class)
	out := newOutside(t, 2)
	sfx := randHex(4)
	bound, other := "api."+sfx+".allowed.test", "other-"+sfx+".test"
	mapHosts(t, out.Addrs[0], bound)
	mapHosts(t, out.Addrs[1], other)
	value := "sk-live-" + randHex(16)

	parent := c.create(map[string]any{"template": sessionTemplate, "runtime": class})
	baseKB := diskKB(t, c, parent)
	baseGB := int(c.do("GET", "/v1/sandboxes/"+parent, nil).JSON()["disk_gb"].(float64))
	setClassPool(t, c, class, 1, 1)
	waitClassPoolReady(t, c, class, 1)

	body := func(name string) map[string]any {
		return map[string]any{"template": sessionTemplate, "runtime": class, "name": name, "ttl_ms": 600000, "type": "dev",
			"parent_id": parent, "disk_gb": baseGB + 1,
			"env":      map[string]any{"GREETING": "hi there"},
			"metadata": map[string]any{"suite": "warm-settings-" + sfx},
			"secrets":  map[string]any{"API_KEY": map[string]any{"value": value, "hosts": []string{bound}}},
			"network":  map[string]any{"egress": "deny", "allow_out": []string{"*." + sfx + ".allowed.test"}},
		}
	}
	create := c.createRecord
	warm := create(body("warm-" + sfx))
	if warm["start"] != "warm" || warm["runtime"] != class {
		t.Fatalf("create with settings and a ready %s pool: start %v runtime %v, want warm: %v", class, warm["start"], warm["runtime"], warm)
	}
	drainClassPool(t, c, class)
	cold := create(body("cold-" + sfx))
	if cold["start"] != "cold" {
		t.Fatalf("create with no pool: start %v, want cold", cold["start"])
	}

	// The record: what the caller asked for, the same way both times.
	for _, k := range []string{"template", "cpu", "ram_mb", "disk_gb", "runtime", "type", "auto_stop_minutes",
		"auto_archive_days", "auto_delete_days", "ttl_ms", "project_id", "parent_id", "auto_resume", "status",
		"network", "secret_names", "env_keys", "metadata"} {
		if w, cv := warm[k], cold[k]; !reflect.DeepEqual(w, cv) {
			t.Errorf("%s: warm %v, cold %v", k, w, cv)
		}
	}
	if warm["disk_gb"] != float64(baseGB+1) || warm["parent_id"] != parent {
		t.Errorf("warm record: disk_gb %v parent_id %v, want %d %s", warm["disk_gb"], warm["parent_id"], baseGB+1, parent)
	}
	// A read afterwards says the same as the create's answer.
	if got := c.do("GET", "/v1/sandboxes/"+warm["id"].(string), nil).JSON(); got["disk_gb"] != warm["disk_gb"] ||
		!reflect.DeepEqual(got["network"], warm["network"]) || !reflect.DeepEqual(got["secret_names"], warm["secret_names"]) {
		t.Errorf("warm record read back: disk_gb %v network %v secret_names %v", got["disk_gb"], got["network"], got["secret_names"])
	}

	type seen struct {
		envKeys string
		diskKB  int64
	}
	check := func(t *testing.T, id string) seen {
		installNetprobe(t, c, id)
		if got := strings.TrimSpace(c.mustSh(id, `echo "$GREETING"`)); got != "hi there" {
			t.Errorf("GREETING = %q", got)
		}
		placeholder := strings.TrimSpace(c.mustSh(id, "echo $API_KEY"))
		if !strings.HasPrefix(placeholder, "pt_secret_") {
			t.Fatalf("API_KEY = %q, want a placeholder", placeholder)
		}
		// What terminal shells and boot services source says the same.
		if f := c.mustSh(id, "cat /etc/pt-env"); !strings.Contains(f, "GREETING=") || !strings.Contains(f, placeholder) {
			t.Errorf("/etc/pt-env lacks the create's env: %q", f)
		}

		// The secret reaches its host as its value, over HTTPS through the
		// proxy, which the guest trusts through the bundle SSL_CERT_FILE
		// names.
		if got := probe(t, c, id, "get", "https://"+bound+"/", "API_KEY"); got != "ok 200 hello "+bound {
			t.Errorf("HTTPS to the allowed, bound host: %q", got)
		} else if r := lastRequest(out, bound); !r.TLS || r.Header.Get("Authorization") != "Bearer "+value {
			t.Errorf("bound host got Authorization %q (TLS %v), want the value", r.Header.Get("Authorization"), r.TLS)
		}
		// Everything else is shut: another name does not resolve, and
		// addresses are refused at connect, the allowed host's other ports
		// included.
		wantProbe(t, c, id, "notfound", "resolve", other)
		wantProbe(t, c, id, "refused", "dial", out.Addrs[1].String()+":9000")
		wantProbe(t, c, id, "refused", "dial", out.Addrs[0].String()+":9000")

		// The value is nowhere the sandbox can look.
		inside := c.mustSh(id, "env; cat /etc/pt-env; for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null; echo; done")
		if strings.Contains(inside, value) {
			t.Errorf("the secret value is visible inside the sandbox")
		}
		if !strings.Contains(inside, placeholder) {
			t.Errorf("the placeholder is not in the sandbox's environment: the scan proves nothing")
		}
		for _, pid := range sandboxPids(t, id) {
			for _, f := range []string{"environ", "cmdline"} {
				if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + f); strings.Contains(string(b), value) {
					t.Errorf("pid %d %s holds the secret value", pid, f)
				}
			}
		}
		return seen{envKeys: c.mustSh(id, "env | cut -d= -f1 | sort"), diskKB: diskKB(t, c, id)}
	}
	var w, cl seen
	t.Run("warm", func(t *testing.T) { w = check(t, warm["id"].(string)) })
	t.Run("cold", func(t *testing.T) { cl = check(t, cold["id"].(string)) })
	if w.envKeys != cl.envKeys {
		t.Errorf("env names differ:\nwarm %q\ncold %q", w.envKeys, cl.envKeys)
	}
	if w.diskKB != cl.diskKB || w.diskKB <= baseKB {
		t.Errorf("df: warm %d KB, cold %d KB, the pool's size %d KB", w.diskKB, cl.diskKB, baseKB)
	}
}

// lastRequest is the latest request the outside servers got for host.
func lastRequest(o *outside, host string) seenRequest {
	reqs := o.requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if strings.HasPrefix(reqs[i].Host, host) {
			return reqs[i]
		}
	}
	return seenRequest{}
}

// TestWarmCreateRuntimeClasses: a runc pool and a gVisor pool of the same
// template side by side (docs/sessions.md, "Warm creates"): GET /v1/pools
// lists each with its class, a create with runtime gvisor is served warm
// from the gVisor pool (its guest runs on gVisor's kernel) and one with
// runc from the runc pool, each pool refills behind its claim, and a
// gVisor create of another size boots cold (gVisor keeps its boot size)
// and leaves the gVisor pool's sandbox ready.
func TestWarmCreateRuntimeClasses(t *testing.T) {
	c := newClient(t)
	requireGVisor(t, c)
	ensureTemplate(t, c, sessionTemplate)
	drainClassPool(t, c, "")
	drainClassPool(t, c, "gvisor")
	setClassPool(t, c, "", 1, 1)
	setClassPool(t, c, "gvisor", 1, 1)
	waitClassPoolReady(t, c, "", 1)
	waitClassPoolReady(t, c, "gvisor", 1)

	pools := c.do("GET", "/v1/pools", nil)
	var classes []string
	for _, p := range pools.JSON()["pools"].([]any) {
		if p := p.(map[string]any); p["template"] == sessionTemplate {
			classes = append(classes, p["runtime"].(string))
		}
	}
	if !slices.Contains(classes, "runc") || !slices.Contains(classes, "gvisor") {
		t.Fatalf("GET /v1/pools: %s; want a runc and a gvisor pool of %s", pools.Body, sessionTemplate)
	}

	release, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	hostKernel := strings.TrimSpace(string(release))
	for _, tc := range []struct{ class, kernel string }{{"gvisor", "not the host's"}, {"runc", hostKernel}} {
		sb := c.createRecord(map[string]any{"template": sessionTemplate, "runtime": tc.class})
		if sb["start"] != "warm" || sb["runtime"] != tc.class {
			t.Errorf("create with runtime %s and a ready pool of each class: start %v runtime %v", tc.class, sb["start"], sb["runtime"])
			continue
		}
		got := strings.TrimSpace(c.mustSh(sb["id"].(string), "uname -r"))
		if (tc.class == "runc") != (got == hostKernel) {
			t.Errorf("a warm %s sandbox runs kernel %q (the host's %q)", tc.class, got, hostKernel)
		}
	}
	// Each pool refills behind its claim, with its own class.
	waitClassPoolReady(t, c, "", 1)
	waitClassPoolReady(t, c, "gvisor", 1)

	sb := c.createRecord(map[string]any{"template": sessionTemplate, "runtime": "gvisor", "cpu": 2})
	if sb["start"] != "cold" || sb["runtime"] != "gvisor" || sb["cpu"] != 2.0 {
		t.Errorf("a gvisor create of another cpu: start %v runtime %v cpu %v, want cold", sb["start"], sb["runtime"], sb["cpu"])
	}
	if ready, _ := classPoolCounts(t, c, "gvisor"); ready != 1 {
		t.Errorf("the gvisor pool holds %d ready after a create it cannot serve, want 1", ready)
	}
}

// TestWarmCreateResizedLikeCold: a runc create asking cpu 2 and ram_mb
// 1024 of a pool booted at the default size is served warm — resized live
// before the create answers — and its record and its guest say what a
// cold create of the same body says: cpu, ram_mb and the live headroom;
// nproc (its cpuset), MemTotal (LXCFS) and its cgroup's memory limit.
// The pool refills behind the claim.
func TestWarmCreateResizedLikeCold(t *testing.T) {
	c := newClient(t)
	freshPool(t, c, 1, 1)

	body := func(name string) map[string]any {
		return map[string]any{"template": sessionTemplate, "runtime": "runc", "name": name, "cpu": 2, "ram_mb": 1024}
	}
	warm := c.createRecord(body("warm-" + randHex(4)))
	if warm["start"] != "warm" {
		t.Fatalf("create of cpu 2 / ram_mb 1024 with a ready runc pool: start %v, want warm: %v", warm["start"], warm)
	}
	waitPoolReady(t, c, 1) // refilled behind the claim
	drainPool(t, c)
	cold := c.createRecord(body("cold-" + randHex(4)))
	if cold["start"] != "cold" {
		t.Fatalf("create with no pool: start %v, want cold", cold["start"])
	}

	for _, k := range []string{"cpu", "ram_mb", "disk_gb", "runtime", "live"} {
		if w, cv := warm[k], cold[k]; !reflect.DeepEqual(w, cv) {
			t.Errorf("%s: warm %v, cold %v", k, w, cv)
		}
	}
	if got := c.do("GET", "/v1/sandboxes/"+warm["id"].(string), nil).JSON(); got["cpu"] != 2.0 || got["ram_mb"] != 1024.0 {
		t.Errorf("warm record read back: cpu %v ram_mb %v", got["cpu"], got["ram_mb"])
	}
	type seen struct {
		nproc      string
		memTotalKB int64
		memLimit   int64
	}
	look := func(id string) seen {
		return seen{strings.TrimSpace(c.mustSh(id, "nproc")), memTotalKB(t, c, id), memLimit(t, c, id)}
	}
	w, cl := look(warm["id"].(string)), look(cold["id"].(string))
	want := seen{strconv.Itoa(min(2, runtime.NumCPU())), 1024 * 1024, 1024 << 20}
	if !hostHasLXCFS(t, c) {
		// Without LXCFS /proc/meminfo is the host's in both.
		want.memTotalKB = cl.memTotalKB
	}
	if w != cl || w != want {
		t.Errorf("inside: warm %+v, cold %+v, want %+v", w, cl, want)
	}
}

// hostHasLXCFS reports whether the test ptd's host serves sandboxes their
// own /proc sizes (GET /v1/hosts lxcfs).
func hostHasLXCFS(t *testing.T, c *client) bool {
	t.Helper()
	r := c.do("GET", "/v1/hosts", nil)
	rows, _ := r.JSON()["rows"].([]any)
	if r.Status != 200 || len(rows) == 0 {
		t.Fatalf("GET /v1/hosts: %d %s", r.Status, r.Body)
	}
	return rows[0].(map[string]any)["lxcfs"] == true
}
