package e2e

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Sessions of a workflow or an agent conversation (docs/sessions.md)
// statement by statement, with the camelCase names some clients send:
// vaultId, workflowId, agentSessionId in bodies and in
// GET /api/sandbox/status, sessionId in answers.

// camelSessionBody is a create body in camelCase.
func camelSessionBody(vault, kind, id string) map[string]any {
	return map[string]any{"vaultId": vault, kind: id, "template": sessionTemplate}
}

// camelStatus is GET /api/sandbox/status with camelCase parameter names.
func camelStatus(t *testing.T, c *client, vault, kind, id string) map[string]any {
	t.Helper()
	r := c.do("GET", "/api/sandbox/status?"+url.Values{"vaultId": {vault}, kind: {id}}.Encode(), nil)
	if r.Status != 200 {
		t.Fatalf("status lookup: %d %s", r.Status, r.Body)
	}
	return r.JSON()
}

// createSessionOK posts a session and stops it when the test ends.
func createSessionOK(t *testing.T, c *client, body map[string]any) response {
	t.Helper()
	r := c.do("POST", "/v1/sessions", body)
	if r.Status != 200 && r.Status != 202 {
		t.Fatalf("create session: %d %s", r.Status, r.Body)
	}
	sid := r.JSON()["sessionId"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/sessions/"+sid+"?wait_timeout_ms=60000", nil) })
	return r
}

// passiveStatus reads a context's status by its camelCase names and fails
// the test if the read created a sandbox ("A passive status read does
// not start a new environment").
func passiveStatus(t *testing.T, c *client, vault, kind, id string) map[string]any {
	t.Helper()
	before := countSandboxes(t, c)
	m := camelStatus(t, c, vault, kind, id)
	if after := countSandboxes(t, c); after != before {
		t.Fatalf("a status read created sandboxes: %d → %d", before, after)
	}
	return m
}

// countSandboxes is how many sandboxes the org has, destroyed included.
func countSandboxes(t *testing.T, c *client) int {
	t.Helper()
	return len(rowsOf(t, c, "/v1/sandboxes?limit=200&include=destroyed,failed"))
}

func TestContextSessionColdPathAndIDs(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, sessionTemplate)
	drainPool(t, c)
	vault, wf := "vault-"+randHex(4), "wf-"+randHex(4)

	// "A passive status read does not start a new environment."
	if m := passiveStatus(t, c, vault, "workflowId", wf); m["status"] != "none" || m["sessionId"] != nil {
		t.Fatalf("status of a context without a session: %v", m)
	}

	// Cold path: 202, provisioning; commands are refused until ready.
	r := createSessionOK(t, c, camelSessionBody(vault, "workflowId", wf))
	m := r.JSON()
	sid, _ := m["sessionId"].(string)
	if r.Status != 202 || m["status"] != "provisioning" || !strings.HasPrefix(sid, "ses_") || sid == wf || m["session_id"] != sid || m["workflow_id"] != wf {
		t.Fatalf("cold create: %d %s", r.Status, r.Body)
	}
	// "The SDK's session.id example is not valid": there is no id field
	// to confuse with sessionId.
	if _, ok := m["id"]; ok {
		t.Errorf("session answer has an id field: %s", r.Body)
	}
	if r := c.do("POST", "/v1/sessions/"+sid+"/exec", map[string]any{"cmd": "echo early"}); r.JSON()["status"] == "provisioning" && (r.Status != 409 || r.JSON()["code"] != "not_ready") {
		t.Errorf("command before readiness: %d %s", r.Status, r.Body)
	}
	// The lookup by context reports the lifecycle, by camelCase names.
	if st := camelStatus(t, c, vault, "workflowId", wf); st["sessionId"] != sid {
		t.Errorf("status lookup: %v", st)
	}
	// Waiting has a timeout (wait_timeout_ms) and ends ready.
	w := c.do("GET", "/v1/sessions/"+sid+"?wait_timeout_ms=240000", nil)
	if w.JSON()["status"] != "ready" {
		t.Fatalf("wait: %d %s", w.Status, w.Body)
	}
	if st := camelStatus(t, c, vault, "workflowId", wf); st["status"] != "ready" {
		t.Errorf("status lookup once ready: %v", st)
	}
	if res := c.sessionSh(sid, "echo hi"); res.ExitCode != 0 || res.Stdout != "hi\n" {
		t.Errorf("exec once ready: %+v", res)
	}

	// The IDs are not interchangeable.
	for _, tc := range []struct{ name, method, path string }{
		{"workflow ID as a session ID", "GET", "/v1/sessions/" + wf},
		{"workflow ID for commands", "POST", "/v1/sessions/" + wf + "/exec"},
		{"session ID as a sandbox ID", "GET", "/v1/sandboxes/" + sid},
	} {
		r := c.do(tc.method, tc.path, map[string]any{"cmd": "true"})
		if tc.method == "GET" {
			r = c.do(tc.method, tc.path, nil)
		}
		if r.Status != 404 || r.JSON()["code"] != "not_found" {
			t.Errorf("%s: %d %s", tc.name, r.Status, r.Body)
		}
	}
	// A session ID as workflowId is 404 naming the kind it expects.
	if r := c.do("GET", "/api/sandbox/status?vaultId="+vault+"&workflowId="+sid, nil); r.Status != 404 || r.JSON()["expected"] != "workflow_id" || r.JSON()["got"] != "session_id" {
		t.Errorf("a session ID as workflowId: %d %s", r.Status, r.Body)
	}
	// Both spellings with different values are refused.
	if r := c.do("GET", "/api/sandbox/status?vaultId="+vault+"&workflowId="+wf+"&workflow_id=other", nil); r.Status != 400 || r.JSON()["code"] != "invalid_request" {
		t.Errorf("workflowId and workflow_id differ: %d %s", r.Status, r.Body)
	}
	// Neither context ID: invalid.
	if r := c.do("POST", "/v1/sessions", map[string]any{"vaultId": vault}); r.Status != 400 || r.JSON()["code"] != "invalid_request" {
		t.Errorf("no workflowId or agentSessionId: %d %s", r.Status, r.Body)
	}
}

func TestContextSessionWarmPath(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, sessionTemplate)
	setPool(t, c, 1, 1)
	waitPoolReady(t, c, 1)
	vault, agent := "vault-"+randHex(4), "agent-"+randHex(4)
	if m := passiveStatus(t, c, vault, "agentSessionId", agent); m["status"] != "none" {
		t.Fatalf("status before any session: %v", m)
	}
	// HTTP 200: the warm path has confirmed readiness; use sessionId at once.
	r := createSessionOK(t, c, camelSessionBody(vault, "agentSessionId", agent))
	m := r.JSON()
	sid, _ := m["sessionId"].(string)
	if r.Status != 200 || m["status"] != "ready" || m["warm"] != true || sid == agent || m["agent_session_id"] != agent {
		t.Fatalf("warm create: %d %s", r.Status, r.Body)
	}
	if res := c.sessionSh(sid, "echo warm"); res.ExitCode != 0 || res.Stdout != "warm\n" {
		t.Errorf("exec right after a 200: %+v", res)
	}
	if st := camelStatus(t, c, vault, "agentSessionId", agent); st["status"] != "ready" || st["sessionId"] != sid {
		t.Errorf("status lookup: %v", st)
	}
}

// TestContextSessionStopKeepsWorkspace: stop disposes of the execution
// environment; the workspace store keeps /workspace for the next session
// of the context; other paths and processes are not kept. Status changes
// are broadcast on the event feed.
func TestContextSessionStopKeepsWorkspace(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, sessionTemplate)
	start := lastEventID(t, c)
	vault, wf := "vault-"+randHex(4), "wf-"+randHex(4)
	m := c.readySessionBody(camelSessionBody(vault, "workflowId", wf))
	sid, sbx := m["sessionId"].(string), m["sandbox_id"].(string)
	c.sessionSh(sid, "echo kept > /workspace/evidence.txt && echo lost > /root/scratch.txt && (sleep 1000 &)")

	r := c.do("DELETE", "/v1/sessions/"+sid+"?wait_timeout_ms=120000", nil)
	if r.Status != 200 || r.JSON()["status"] != "stopped" {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
	if st := c.do("GET", "/v1/sandboxes/"+sbx+"?include_deleted=true", nil).JSON()["state"]; st != "deleting" && st != "deleted" {
		t.Errorf("the session's sandbox after stop: %v", st)
	}
	if r := c.do("POST", "/v1/sessions/"+sid+"/exec", map[string]any{"cmd": "true"}); r.Status != 409 || r.JSON()["code"] != "session_ended" {
		t.Errorf("exec after stop: %d %s", r.Status, r.Body)
	}
	if st := camelStatus(t, c, vault, "workflowId", wf); st["status"] != "stopped" {
		t.Errorf("status lookup after stop: %v", st)
	}

	// The broadcast: every status change of the session is on the feed.
	page := c.do("GET", "/v1/events?format=json&limit=1000&session_id="+sid+"&after="+strconv.FormatInt(start, 10), nil)
	var feed struct {
		Rows []struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		} `json:"rows"`
	}
	json.Unmarshal(page.Body, &feed)
	var seen []string
	for _, e := range feed.Rows {
		var d struct {
			SessionID string `json:"session_id"`
			Status    string `json:"status"`
		}
		json.Unmarshal(e.Data, &d)
		if e.Type == "session_status_changed" && d.SessionID == sid {
			seen = append(seen, d.Status)
		}
	}
	if !strings.Contains(strings.Join(seen, ","), "ready") || seen[len(seen)-1] != "stopped" {
		t.Errorf("broadcast statuses %v (%s)", seen, page.Body)
	}

	// The next session of the context gets the workspace, nothing else.
	m2 := c.readySessionBody(camelSessionBody(vault, "workflowId", wf))
	sid2 := m2["sessionId"].(string)
	if sid2 == sid {
		t.Fatalf("a new session reused the stopped one's ID")
	}
	if got := c.sessionSh(sid2, "cat /workspace/evidence.txt").Stdout; got != "kept\n" {
		t.Errorf("workspace file in the next session: %q", got)
	}
	if res := c.sessionSh(sid2, "cat /root/scratch.txt"); res.ExitCode == 0 {
		t.Errorf("/root survived disposal: %q", res.Stdout)
	}
	if res := c.sessionSh(sid2, "pgrep -f 'sleep 1000' || ps | grep -v grep | grep 'sleep 1000'"); res.ExitCode == 0 {
		t.Errorf("a process survived disposal: %q", res.Stdout)
	}
}

// TestContextSessionFailureHasReason: an environment lost under a session ends it
// failed, with a reason, visible to the status lookup.
func TestContextSessionFailureHasReason(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, sessionTemplate)
	vault, wf := "vault-"+randHex(4), "wf-"+randHex(4)
	m := c.readySessionBody(camelSessionBody(vault, "workflowId", wf))
	if r := c.do("DELETE", "/v1/sandboxes/"+m["sandbox_id"].(string), nil); r.Status != 202 {
		t.Fatalf("delete the session's sandbox: %d %s", r.Status, r.Body)
	}
	deadline := time.Now().Add(time.Minute)
	var st map[string]any
	for time.Now().Before(deadline) {
		if st = camelStatus(t, c, vault, "workflowId", wf); st["status"] == "failed" {
			break
		}
		sleep(100)
	}
	if st["status"] != "failed" || st["reason"] == nil || st["reason"] == "" {
		t.Errorf("session after its sandbox was deleted: %v", st)
	}
}

// readySessionBody creates a session and waits until it is ready.
func (c *client) readySessionBody(body map[string]any) map[string]any {
	c.t.Helper()
	m := createSessionOK(c.t, c, body).JSON()
	if m["status"] != "ready" {
		r := c.do("GET", "/v1/sessions/"+m["sessionId"].(string)+"?wait_timeout_ms=240000", nil)
		if m = r.JSON(); m["status"] != "ready" {
			c.t.Fatalf("session never became ready: %s", r.Body)
		}
	}
	return m
}
