package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Sessions (docs/sessions.md) against a real ptd: warm (200) and cold (202)
// creates, pool refill, concurrent claims, not_ready refusal, the ID
// kinds, passive status lookups, and workspaces across sessions.

const sessionTemplate = "busybox"

// setPool configures the busybox pool and drains it when the test ends.
func setPool(t *testing.T, c *client, minReady, max int) {
	t.Helper()
	setClassPool(t, c, "", minReady, max)
}

// setClassPool sets the busybox pool of a runtime class ("" the default)
// and resets it when the test ends.
func setClassPool(t *testing.T, c *client, class string, minReady, max int) {
	t.Helper()
	r := c.do("PUT", "/v1/pools/"+sessionTemplate, map[string]any{"min_ready": minReady, "max": max, "runtime": class})
	if r.Status != 200 {
		t.Fatalf("PUT pool %s: %d %s", class, r.Status, r.Body)
	}
	t.Cleanup(func() {
		c.do("PUT", "/v1/pools/"+sessionTemplate, map[string]any{"min_ready": 0, "max": 0, "runtime": class})
	})
}

// harnessDefaultClass is the runtime class of the test ptd's sandboxes
// that name none (it runs with --default-runtime runc).
const harnessDefaultClass = "runc"

// poolCounts returns the busybox pool's ready and provisioning counts
// (the default class's).
func poolCounts(t *testing.T, c *client) (ready, provisioning int) {
	t.Helper()
	return classPoolCounts(t, c, "")
}

// classPoolCounts returns the ready and provisioning counts of the busybox
// pool of a runtime class ("" the default).
func classPoolCounts(t *testing.T, c *client, class string) (ready, provisioning int) {
	t.Helper()
	if class == "" {
		class = harnessDefaultClass
	}
	r := c.do("GET", "/v1/pools", nil)
	if r.Status != 200 {
		t.Fatalf("GET pools: %d %s", r.Status, r.Body)
	}
	for _, p := range r.JSON()["pools"].([]any) {
		m := p.(map[string]any)
		if m["template"] == sessionTemplate && m["runtime"] == class {
			return int(m["ready"].(float64)), int(m["provisioning"].(float64))
		}
	}
	return 0, 0
}

// waitPoolReady waits until the pool has at least n ready sandboxes.
func waitPoolReady(t *testing.T, c *client, n int) {
	t.Helper()
	waitClassPoolReady(t, c, "", n)
}

// waitClassPoolReady waits until the busybox pool of a runtime class (""
// the default) has at least n ready sandboxes.
func waitClassPoolReady(t *testing.T, c *client, class string, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if ready, _ := classPoolCounts(t, c, class); ready >= n {
			return
		}
		sleep(100)
	}
	ready, prov := classPoolCounts(t, c, class)
	t.Fatalf("pool %q never reached %d ready (ready %d, provisioning %d)", class, n, ready, prov)
}

// freshPool builds the session template, empties its pool, sets the
// pool to minReady/max and waits until minReady of it are ready.
func freshPool(t *testing.T, c *client, minReady, max int) {
	t.Helper()
	ensureTemplate(t, c, sessionTemplate)
	drainPool(t, c)
	setPool(t, c, minReady, max)
	waitPoolReady(t, c, minReady)
}

// drainPool sets the pool to 0/0 and waits until it holds nothing.
func drainPool(t *testing.T, c *client) {
	t.Helper()
	drainClassPool(t, c, "")
}

// drainClassPool sets the busybox pool of a runtime class ("" the
// default) to 0/0 and waits until it holds nothing.
func drainClassPool(t *testing.T, c *client, class string) {
	t.Helper()
	c.do("PUT", "/v1/pools/"+sessionTemplate, map[string]any{"min_ready": 0, "max": 0, "runtime": class})
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if ready, prov := classPoolCounts(t, c, class); ready == 0 && prov == 0 {
			return
		}
		sleep(100)
	}
	t.Fatalf("pool %q never drained", class)
}

type sessionCtx struct{ vault, workflow, agentSession string }

func newSessionCtx() sessionCtx {
	return sessionCtx{vault: "vault-" + randHex(4), workflow: "wf-" + randHex(4)}
}

func (sc sessionCtx) body() map[string]any {
	b := map[string]any{"vault_id": sc.vault, "template": sessionTemplate}
	if sc.workflow != "" {
		b["workflow_id"] = sc.workflow
	} else {
		b["agent_session_id"] = sc.agentSession
	}
	return b
}

func (sc sessionCtx) query() string {
	q := url.Values{"vault_id": {sc.vault}}
	if sc.workflow != "" {
		q.Set("workflow_id", sc.workflow)
	} else {
		q.Set("agent_session_id", sc.agentSession)
	}
	return q.Encode()
}

// createSession posts a session and stops it when the test ends.
func (c *client) createSession(sc sessionCtx) response {
	c.t.Helper()
	r := c.do("POST", "/v1/sessions", sc.body())
	if r.Status != 200 && r.Status != 202 {
		c.t.Fatalf("create session: %d %s", r.Status, r.Body)
	}
	id := r.JSON()["session_id"].(string)
	c.t.Cleanup(func() { c.do("DELETE", "/v1/sessions/"+id+"?wait_timeout_ms=60000", nil) })
	return r
}

// readySession creates a session of sc and waits until it is ready.
func (c *client) readySession(sc sessionCtx) map[string]any {
	c.t.Helper()
	m := c.createSession(sc).JSON()
	if m["status"] != "ready" {
		r := c.do("GET", "/v1/sessions/"+m["session_id"].(string)+"?wait_timeout_ms=240000", nil)
		m = r.JSON()
		if m["status"] != "ready" {
			c.t.Fatalf("session never became ready: %s", r.Body)
		}
	}
	return m
}

// sessionSh runs a shell command through the session's exec route.
func (c *client) sessionSh(id, script string) execResult {
	c.t.Helper()
	return c.shAt("session exec", "/v1/sessions/"+id+"/exec", script, 60000)
}

func TestSessionColdPathRefusesCommandsUntilReady(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, sessionTemplate)
	drainPool(t, c)
	sc := newSessionCtx()
	r := c.createSession(sc)
	m := r.JSON()
	if r.Status != 202 || m["status"] != "provisioning" || m["warm"] != false {
		t.Fatalf("cold create: %d %s; want 202 provisioning", r.Status, r.Body)
	}
	id := m["session_id"].(string)
	if !strings.HasPrefix(id, "ses_") || id == sc.workflow || m["sessionId"] != id {
		t.Fatalf("session_id %q: want a ses_ ID distinct from the workflow %q (and sessionId equal)", id, sc.workflow)
	}
	if _, ok := m["id"]; ok {
		t.Errorf("session has an ambiguous \"id\" field: %s", r.Body)
	}

	// A command before readiness is refused, and never runs later.
	early := c.do("POST", "/v1/sessions/"+id+"/exec", map[string]any{"cmd": "echo early > /tmp/early"})
	if early.Status != 409 || early.JSON()["code"] != "not_ready" || early.JSON()["status"] != "provisioning" {
		t.Fatalf("exec before ready: %d %s; want 409 not_ready", early.Status, early.Body)
	}
	w := c.do("GET", "/v1/sessions/"+id+"?wait_timeout_ms=240000", nil)
	if w.JSON()["status"] != "ready" || w.JSON()["ready_at"] == nil {
		t.Fatalf("wait for ready: %s", w.Body)
	}
	if out := c.sessionSh(id, "test -e /tmp/early && echo ran || echo never; test -d /workspace && echo ws"); out.Stdout != "never\nws\n" {
		t.Fatalf("after ready: %q; want the early command never run and /workspace present", out.Stdout)
	}

	// Stop disposes of the sandbox; commands are refused afterwards.
	sbx := w.JSON()["sandbox_id"].(string)
	st := c.do("DELETE", "/v1/sessions/"+id+"?wait_timeout_ms=120000", nil)
	if st.Status != 200 || st.JSON()["status"] != "stopped" {
		t.Fatalf("stop: %d %s", st.Status, st.Body)
	}
	if g := c.do("GET", "/v1/sandboxes/"+sbx, nil); g.Status != 404 {
		t.Errorf("sandbox after stop: %d %s; want 404 (disposed of)", g.Status, g.Body)
	}
	after := c.do("POST", "/v1/sessions/"+id+"/exec", map[string]any{"cmd": "true"})
	if after.Status != 409 || after.JSON()["code"] != "session_ended" {
		t.Errorf("exec after stop: %d %s; want 409 session_ended", after.Status, after.Body)
	}

	// Every status change was broadcast, findable by session and by context.
	for _, q := range []string{"session_id=" + id, "vault_id=" + sc.vault + "&workflow_id=" + sc.workflow} {
		ev := c.do("GET", "/v1/events?format=json&limit=1000&"+q, nil)
		var page struct {
			Rows []struct {
				Type string `json:"type"`
				Data struct {
					SessionID string `json:"session_id"`
					Status    string `json:"status"`
				} `json:"data"`
			} `json:"rows"`
		}
		if ev.Status != 200 || json.Unmarshal(ev.Body, &page) != nil {
			t.Fatalf("events %s: %d %s", q, ev.Status, ev.Body)
		}
		var statuses []string
		for _, e := range page.Rows {
			if e.Type == "session_status_changed" && e.Data.SessionID == id {
				statuses = append(statuses, e.Data.Status)
			}
		}
		if want := "provisioning ready stopping stopped"; strings.Join(statuses, " ") != want {
			t.Errorf("session events by %s: %v; want %s", q, statuses, want)
		}
	}
}

func TestSessionWarmPathAndRefill(t *testing.T) {
	c := newClient(t)
	freshPool(t, c, 1, 2)
	// The host that holds the pool says so, and so does /metrics.
	hosts := c.do("GET", "/v1/hosts", nil)
	var onHost float64
	for _, wp := range hosts.JSON()["rows"].([]any)[0].(map[string]any)["warm_pools"].([]any) {
		if wp := wp.(map[string]any); wp["template"] == sessionTemplate && wp["runtime"] == harnessDefaultClass {
			onHost = wp["ready"].(float64)
		}
	}
	if onHost < 1 {
		t.Errorf("GET /v1/hosts warm_pools: %s; want %s with a ready sandbox", hosts.Body, sessionTemplate)
	}
	text := scrapeMetrics(t, env.metricsURL, "")
	if v := metricValue(text, `platinum_warm_pool_min_ready{runtime="runc",template="busybox"}`); v != "1" {
		t.Errorf("platinum_warm_pool_min_ready = %q, want 1", v)
	}
	if v, _ := strconv.Atoi(metricValue(text, `platinum_warm_pool_sandboxes{runtime="runc",state="ready",template="busybox"}`)); v < 1 {
		t.Errorf("platinum_warm_pool_sandboxes ready = %d, want at least 1", v)
	}

	sc := newSessionCtx()
	r := c.createSession(sc)
	m := r.JSON()
	if r.Status != 200 || m["status"] != "ready" || m["warm"] != true {
		t.Fatalf("warm create: %d %s; want 200 ready warm", r.Status, r.Body)
	}
	id, sbx := m["session_id"].(string), m["sandbox_id"].(string)
	// Ready means ready: the first command runs at once.
	if out := c.sessionSh(id, "echo hi; test -d /workspace && ls -A /workspace | wc -l"); out.ExitCode != 0 || out.Stdout != "hi\n0\n" {
		t.Fatalf("first exec: %+v; want hi and an empty workspace", out)
	}
	// The claimed sandbox now belongs to the caller's org.
	g := c.do("GET", "/v1/sandboxes/"+sbx, nil)
	if g.Status != 200 || g.JSON()["metadata"].(map[string]any)["pt_session_id"] != id {
		t.Fatalf("claimed sandbox: %d %s", g.Status, g.Body)
	}

	// The pool refills in the background with a fresh sandbox.
	waitPoolReady(t, c, 1)
	sc2 := newSessionCtx()
	r2 := c.createSession(sc2)
	if r2.Status != 200 || r2.JSON()["sandbox_id"] == sbx {
		t.Fatalf("second warm create: %d %s; want 200 with another sandbox", r2.Status, r2.Body)
	}
	// Creating again for a context with a live session returns it.
	again := c.do("POST", "/v1/sessions", sc.body())
	if again.Status != 200 || again.JSON()["session_id"] != id {
		t.Fatalf("create for a live context: %d %s; want its session %s", again.Status, again.Body, id)
	}
}

func TestSessionConcurrentCreatesGetDistinctSandboxes(t *testing.T) {
	c := newClient(t)
	const n = 3
	freshPool(t, c, n, n)

	var mu sync.Mutex
	sandboxes := map[string]string{}
	warm := 0
	var wg sync.WaitGroup
	for range n + 1 { // one more than the pool holds: it goes cold
		wg.Go(func() {
			r := c.createSession(newSessionCtx())
			m := r.JSON()
			if r.Status == 200 {
				mu.Lock()
				warm++
				if prev, dup := sandboxes[m["sandbox_id"].(string)]; dup {
					t.Errorf("sandbox %s given to %s and %s", m["sandbox_id"], prev, m["session_id"])
				}
				sandboxes[m["sandbox_id"].(string)] = m["session_id"].(string)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if warm != n {
		t.Errorf("%d warm creates, want %d (one per pooled sandbox)", warm, n)
	}

	// Concurrent creates of one context share one session.
	sc := newSessionCtx()
	ids := make([]string, 4)
	for i := range ids {
		wg.Go(func() { ids[i] = c.createSession(sc).JSON()["session_id"].(string) })
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("one context got sessions %v; want one", ids)
		}
	}
}

func TestSessionIDKindsAreNotInterchangeable(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, sessionTemplate)
	sc := newSessionCtx()
	id := c.createSession(sc).JSON()["session_id"].(string)

	tests := []struct {
		name, method, path string
		body               any
		field, got         string
	}{
		{"workflow id as session id", "GET", "/v1/sessions/" + sc.workflow, nil, "session_id", "workflow_id"},
		{"workflow id to session exec", "POST", "/v1/sessions/" + sc.workflow + "/exec", map[string]any{"cmd": "true"}, "session_id", "workflow_id"},
		{"workflow id to session stop", "DELETE", "/v1/sessions/" + sc.workflow, nil, "session_id", "workflow_id"},
		{"session id as workflow id", "POST", "/v1/sessions", map[string]any{"vault_id": sc.vault, "workflow_id": id}, "workflow_id", "session_id"},
		{"session id as agent session id", "GET", "/v1/sessions/status?vault_id=" + sc.vault + "&agent_session_id=" + id, nil, "agent_session_id", "session_id"},
		{"unknown id", "GET", "/v1/sessions/nope-" + randHex(3), nil, "session_id", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do(tc.method, tc.path, tc.body)
			m := r.JSON()
			msg, _ := m["error"].(string)
			if r.Status != 404 || m["code"] != "not_found" || m["field"] != tc.field {
				t.Fatalf("%d %s; want 404 not_found on %s", r.Status, r.Body, tc.field)
			}
			if !strings.Contains(msg, "expects a") || !strings.Contains(msg, strings.TrimSuffix(tc.field, "_id")) {
				t.Errorf("message %q does not say which ID is expected", msg)
			}
			if tc.got != "" && (m["got"] != tc.got || !strings.Contains(msg, tc.got)) {
				t.Errorf("message %q (got %v) does not say it was a %s", msg, m["got"], tc.got)
			}
		})
	}
	// The sandbox routes do not take a session ID either.
	if r := c.do("GET", "/v1/sandboxes/"+id, nil); r.Status != 404 || r.JSON()["got"] != "session_id" || !strings.Contains(r.JSON()["error"].(string), "expects a sandbox_id") {
		t.Errorf("session ID on a sandbox route: %d %s; want 404 saying a sandbox_id is expected", r.Status, r.Body)
	}
}

func TestSessionStatusLookupCreatesNothing(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, sessionTemplate)
	drainPool(t, c)
	// newest is the newest live sandbox's ID (IDs sort by creation time;
	// a sandbox created by the lookup would be newer) and the session
	// count.
	count := func() (string, int) {
		r := c.do("GET", "/v1/sandboxes?limit=1", nil)
		s := c.do("GET", "/v1/sessions?all=true", nil)
		newest := ""
		if rows := r.JSON()["rows"].([]any); len(rows) > 0 {
			newest = rows[0].(map[string]any)["id"].(string)
		}
		return newest, len(s.JSON()["sessions"].([]any))
	}
	sbx0, ses0 := count()
	sc := newSessionCtx()
	for _, path := range []string{
		"/v1/sessions/status?" + sc.query(),
		"/api/sandbox/status?vaultId=" + sc.vault + "&workflowId=" + sc.workflow, // the camelCase names
	} {
		r := c.do("GET", path, nil)
		if r.Status != 200 || r.JSON()["status"] != "none" || r.JSON()["session_id"] != nil {
			t.Fatalf("GET %s: %d %s; want 200 status none", path, r.Status, r.Body)
		}
	}
	sbx1, ses1 := count()
	if sbx1 > sbx0 || ses1 != ses0 {
		t.Fatalf("status lookup created something: newest sandbox %q → %q, sessions %d → %d", sbx0, sbx1, ses0, ses1)
	}
	if ready, prov := poolCounts(t, c); ready+prov != 0 {
		t.Fatalf("status lookup started pooled sandboxes: %d ready, %d provisioning", ready, prov)
	}

	// Once a session exists, the lookup returns its status.
	id := c.createSession(sc).JSON()["session_id"].(string)
	r := c.do("GET", "/v1/sessions/status?"+sc.query(), nil)
	if r.Status != 200 || r.JSON()["session_id"] != id {
		t.Fatalf("status after create: %d %s; want session %s", r.Status, r.Body, id)
	}
	if st := r.JSON()["status"]; st != "provisioning" && st != "ready" {
		t.Fatalf("status %v", st)
	}
}

func TestSessionWorkspaceSurvivesAcrossSessionsOfOneContext(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, sessionTemplate)
	sc := newSessionCtx()
	m := c.readySession(sc)
	id := m["session_id"].(string)
	if ws := m["workspace"].(map[string]any); ws["path"] != "/workspace" || !strings.HasPrefix(ws["name"].(string), "ws_") {
		t.Fatalf("workspace: %v", ws)
	}
	secret := randHex(8)
	if out := c.sessionSh(id, fmt.Sprintf("mkdir -p /workspace/sub && echo %s > /workspace/sub/notes.txt && echo pkg > /root/installed", secret)); out.ExitCode != 0 {
		t.Fatalf("write: %+v", out)
	}
	if st := c.do("DELETE", "/v1/sessions/"+id+"?wait_timeout_ms=120000", nil); st.JSON()["status"] != "stopped" || st.JSON()["reason"] != "user_stopped" {
		t.Fatalf("stop: %s", st.Body)
	}

	// A later session of the same context gets the same workspace, and
	// nothing else of the old sandbox.
	m2 := c.readySession(sc)
	if m2["session_id"] == id || m2["sandbox_id"] == m["sandbox_id"] {
		t.Fatalf("second session reused the first: %v", m2)
	}
	out := c.sessionSh(m2["session_id"].(string), "cat /workspace/sub/notes.txt; test -e /root/installed && echo kept || echo gone")
	if out.Stdout != secret+"\ngone\n" {
		t.Fatalf("second session sees %q; want the workspace file and no /root/installed", out.Stdout)
	}

	// Other contexts (another workflow of the vault, an agent session
	// with the same ID, another vault) do not see it.
	for _, other := range []sessionCtx{
		{vault: sc.vault, workflow: "wf-" + randHex(4)},
		{vault: sc.vault, agentSession: sc.workflow},
		{vault: "vault-" + randHex(4), workflow: sc.workflow},
	} {
		o := c.readySession(other)
		if out := c.sessionSh(o["session_id"].(string), "ls -A /workspace | wc -l"); out.Stdout != "0\n" {
			t.Errorf("context %+v sees %q entries in /workspace; want an empty workspace", other, out.Stdout)
		}
	}
}

func TestSessionStopWhileProvisioning(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, sessionTemplate)
	drainPool(t, c)
	r := c.createSession(newSessionCtx())
	m := r.JSON()
	if r.Status != 202 {
		t.Fatalf("cold create: %d %s", r.Status, r.Body)
	}
	id, sbx := m["session_id"].(string), m["sandbox_id"].(string)
	st := c.do("DELETE", "/v1/sessions/"+id+"?wait_timeout_ms=120000", nil)
	if st.Status != 200 || st.JSON()["status"] != "stopped" || st.JSON()["ready_at"] != nil {
		t.Fatalf("stop while provisioning: %d %s; want stopped, never ready", st.Status, st.Body)
	}
	if g := c.do("GET", "/v1/sandboxes/"+sbx, nil); g.Status != 404 {
		t.Errorf("sandbox after stop: %d %s; want 404", g.Status, g.Body)
	}
	sleep(300) // a stale provisioner must not bring it back
	if g := c.do("GET", "/v1/sessions/"+id, nil); g.JSON()["status"] != "stopped" {
		t.Errorf("session after stop: %s", g.Body)
	}
}
