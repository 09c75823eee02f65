package e2e

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestWarmCreateBehavesLikeCold: with a warm pool for the template, a plain
// POST /v1/sandboxes is handed a pooled sandbox (start "warm", running at
// once) that a caller cannot tell from one booted for the same body (start
// "cold") but by those two things: the same record fields, the same
// environment inside, the same files. Two warm creates share no hostname,
// token or file, and the pool refills behind them.
func TestWarmCreateBehavesLikeCold(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, sessionTemplate)
	drainPool(t, c)
	setPool(t, c, 3, 3)
	waitPoolReady(t, c, 3)

	// The guide's example (docs/sessions.md, "Warm creates").
	status, gb := guideCurl(t, guideExample(t, "sessions.md#warm-create"), nil)
	if g := jsonMap(gb); status != 201 || g["start"] != "warm" || g["state"] != "running" {
		t.Fatalf("the guide's warm create: %d %s", status, gb)
	} else {
		t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+g["id"].(string), nil) })
	}

	body := func() map[string]any {
		return map[string]any{"template": sessionTemplate, "name": "warm-" + randHex(4), "ttl_ms": 600000, "type": "dev",
			"env": map[string]any{"GREETING": "hi there"}, "metadata": map[string]any{"suite": "warm-" + randHex(2)}}
	}
	create := func(b map[string]any) map[string]any {
		t.Helper()
		r := c.do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=300000", b)
		if r.Status != 201 || r.JSON()["state"] != "running" {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		m := r.JSON()
		t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+m["id"].(string), nil) })
		return m
	}
	wb := body()
	warm := create(wb)
	if warm["start"] != "warm" {
		t.Fatalf("create with a ready pool: start %v, want warm: %v", warm["start"], warm)
	}
	warm2 := create(body())
	if warm2["start"] != "warm" || warm2["id"] == warm["id"] {
		t.Fatalf("second create: %v %v, want another warm sandbox", warm2["start"], warm2["id"])
	}
	waitPoolReady(t, c, 1) // refilled behind the claims

	drainPool(t, c)
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
