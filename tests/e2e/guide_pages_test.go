package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The guide's examples page by page, for the pages TestGuideCurlExamples
// and TestGuideCLIExamples do not walk. Each test runs the page's examples
// verbatim (guideCurl, guideRun) and checks what the page says they do.

// idIn returns the first match of an ID pattern in out, failing the test
// when there is none.
func idIn(t *testing.T, pattern, out string) string {
	t.Helper()
	id := regexp.MustCompile(pattern).FindString(out)
	if id == "" {
		t.Fatalf("no %s in %q", pattern, out)
	}
	return id
}

// guideSandbox creates a running sandbox of template for a page's
// examples; it is deleted when the test ends.
func guideSandbox(t *testing.T, c *client, template string) string {
	t.Helper()
	ensureTemplate(t, c, template)
	return c.create(map[string]any{"template": template})
}

func TestGuideAPI(t *testing.T) {
	c := newClient(t)
	if status, body := guideCurl(t, guideExample(t, "api.md#healthz"), nil); status != 200 {
		t.Errorf("healthz: %d %s", status, body)
	}
	status, body := guideCurl(t, guideExample(t, "api.md#not-found"), nil)
	if m := jsonMap(body); status != 404 || m["code"] != "not_found" || m["request_id"] == nil || m["error"] == "" {
		t.Errorf("not found: %d %s", status, body)
	}
	ensureTemplate(t, c, "busybox")
	first, b1 := guideCurl(t, guideExample(t, "api.md#idempotent-create"), nil)
	again, b2 := guideCurl(t, guideExample(t, "api.md#idempotent-create"), nil)
	id := deleteLater(t, c, jsonMap(b1)["id"], "/v1/sandboxes/%s")
	if first != 201 || again != 201 || id == "" || jsonMap(b2)["id"] != id {
		t.Errorf("the same create with one key twice: %d %s / %d %s", first, b1, again, b2)
	}
}

func TestGuideLifecycle(t *testing.T) {
	c := newClient(t)
	id := guideSandbox(t, c, "busybox")
	vars := map[string]string{"SBX": id}
	before := time.Now()
	status, body := guideCurl(t, guideExample(t, "lifecycle.md#set-ttl"), vars)
	m := jsonMap(body)
	if status != 200 || m["ttl_ms"] != 1800000.0 {
		t.Fatalf("set ttl: %d %s", status, body)
	}
	if exp := parseISO(t, m["expires_at"]); exp.Before(before.Add(29*time.Minute)) || exp.After(time.Now().Add(31*time.Minute)) {
		t.Errorf("expires_at %v is not 30 minutes from now", exp)
	}
	guideRun(t, guideExample(t, "lifecycle.md#set-ttl-cli"), vars)
	if got := c.do("GET", "/v1/sandboxes/"+id, nil).JSON(); got["ttl_ms"] != 1800000.0 || got["expires_at"] == m["expires_at"] {
		t.Errorf("pt sandbox ttl 30m: ttl_ms %v, expires_at %v (was %v)", got["ttl_ms"], got["expires_at"], m["expires_at"])
	}
}

func TestGuideEnvAndSecrets(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "pt-base")
	create := func(t *testing.T, ref string) string {
		t.Helper()
		status, body := guideCurl(t, guideExample(t, ref), nil)
		m := jsonMap(body)
		id := deleteLater(t, c, m["id"], "/v1/sandboxes/%s")
		if status != 201 || m["state"] != "running" {
			t.Fatalf("%s: %d %s", ref, status, body)
		}
		return id
	}
	id := create(t, "env-and-secrets.md#create-with-env")
	if got := c.mustSh(id, "printenv STAGE"); got != "test\n" {
		t.Errorf("printenv STAGE = %q", got)
	}
	c.do("PATCH", "/v1/sandboxes/"+id+"/env", map[string]any{"env": map[string]any{"OLD_UNUSED": "old"}})
	guideRun(t, guideExample(t, "env-and-secrets.md#patch-env-cli"), map[string]string{"SBX": id})
	if got := c.mustSh(id, "printenv API_TOKEN"); got != "new-value\n" {
		t.Errorf("printenv API_TOKEN = %q", got)
	}
	if res := c.sh(id, "printenv OLD_UNUSED"); res.ExitCode == 0 {
		t.Errorf("OLD_UNUSED still set: %q", res.Stdout)
	}

	sid := create(t, "env-and-secrets.md#create-with-secret")
	out := guideRun(t, guideExample(t, "env-and-secrets.md#secret-placeholder"), map[string]string{"SBX": sid})
	if !strings.HasPrefix(out, "pt_secret_") || strings.Contains(out, "ghp_example") {
		t.Errorf("GITHUB_TOKEN inside the sandbox = %q, want a pt_secret_ placeholder", out)
	}
	if m := c.do("GET", "/v1/sandboxes/"+sid, nil).JSON(); !strings.Contains(string(mustJSON(m["secret_names"])), "GITHUB_TOKEN") {
		t.Errorf("secret_names = %v", m["secret_names"])
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestGuideSnapshots(t *testing.T) {
	c := newClient(t)
	id := guideSandbox(t, c, "busybox")
	c.mustSh(id, "echo before > /root/state")
	vars := map[string]string{"SBX": id}
	snap := idIn(t, `snap_\w+`, guideRun(t, guideCommand(t, "snapshots.md#snapshot-cli", 0), vars))
	if out := guideRun(t, guideCommand(t, "snapshots.md#snapshot-cli", 1), vars); !strings.Contains(out, snap) || !strings.Contains(out, "before-upgrade") {
		t.Errorf("snapshot list: %s", out)
	}
	vars["SNAP"] = snap

	c.mustSh(id, "echo after > /root/state")
	guideRun(t, guideExample(t, "snapshots.md#restore-cli"), vars)
	if got := c.mustSh(id, "cat /root/state"); got != "before\n" {
		t.Errorf("after the restore /root/state = %q, want the snapshot's", got)
	}

	status, body := guideCurl(t, guideExample(t, "snapshots.md#clone"), vars)
	clone := deleteLater(t, c, jsonMap(body)["id"], "/v1/sandboxes/%s")
	if status != 201 || jsonMap(body)["state"] != "running" {
		t.Fatalf("clone: %d %s", status, body)
	}
	if got := c.mustSh(clone, "cat /root/state; hostname"); got != "before\n"+clone+"\n" {
		t.Errorf("the clone's state and hostname = %q", got)
	}

	out := guideRun(t, guideExample(t, "snapshots.md#fork-cli"), vars)
	forks := regexp.MustCompile(`(?m)^(sbx_\w+)\trunning$`).FindAllStringSubmatch(out, -1)
	for _, f := range forks {
		t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+f[1], nil) })
	}
	if len(forks) != 2 {
		t.Fatalf("fork -n 2 --wait: %s", out)
	}
	for _, f := range forks {
		if m := c.do("GET", "/v1/sandboxes/"+f[1], nil).JSON(); m["parent_id"] != id {
			t.Errorf("fork %s: parent_id %v, want %s", f[1], m["parent_id"], id)
		}
	}

	bkp := idIn(t, `bkp_\w+`, guideRun(t, guideExample(t, "snapshots.md#backup-cli"), vars))
	if m := c.do("GET", "/v1/snapshots/"+bkp, nil).JSON(); m["state"] != "ready" || m["complete"] != true || m["kind"] != "backup" {
		t.Errorf("backup after --wait: %v", m)
	}
}

func TestGuidePreviewAndNetwork(t *testing.T) {
	c := newClient(t)
	id := guideSandbox(t, c, "busybox")
	startPreviewSrv(t, c, id, true)
	vars := map[string]string{"SBX": id}
	status, body := guideCurl(t, guideExample(t, "preview-and-network.md#preview-url"), vars)
	var u previewURLs
	if err := json.Unmarshal(body, &u); status != 200 || err != nil || u.Token == "" || u.ExpiresAt == nil {
		t.Fatalf("preview-urls: %d %s", status, body)
	}
	out := guideRun(t, guideExample(t, "preview-and-network.md#preview-request"), map[string]string{"URL": u.URL + "hello", "TOKEN": u.Token})
	if !strings.HasPrefix(out, "hello from GET /hello") || strings.Contains(out, u.Token) {
		t.Errorf("through the preview URL: %q (the token must not reach the sandbox)", out)
	}
	if out := guideRun(t, guideExample(t, "preview-and-network.md#preview-cli"), vars); !strings.Contains(out, "8080-") {
		t.Errorf("pt sandbox preview: %s", out)
	}

	status, body = guideCurl(t, guideExample(t, "preview-and-network.md#network-deny"), vars)
	if m := jsonMap(body); status != 200 || m["applies"] != "now" {
		t.Fatalf("network patch: %d %s", status, body)
	}
	guideRun(t, guideExample(t, "preview-and-network.md#network-cli"), vars)
	nw, _ := c.do("GET", "/v1/sandboxes/"+id, nil).JSON()["network"].(map[string]any)
	if got := string(mustJSON(nw)); nw["egress"] != "deny" || got != `{"allow_out":["api.github.com","*.pypi.org"],"deny_out":[],"egress":"deny"}` {
		t.Errorf("network after pt sandbox network = %s", got)
	}
}

func TestGuideSessions(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "busybox")
	status, body := guideCurl(t, guideExample(t, "sessions.md#create"), nil)
	m := jsonMap(body)
	ses := deleteLater(t, c, m["session_id"], "/v1/sessions/%s?wait_timeout_ms=60000")
	if (status != 200 && status != 202) || !strings.HasPrefix(ses, "ses_") || m["workflow_id"] != "wf-42" {
		t.Fatalf("create session: %d %s", status, body)
	}
	vars := map[string]string{"SES": ses}
	if status, body := guideCurl(t, guideExample(t, "sessions.md#wait"), vars); status != 200 || jsonMap(body)["status"] != "ready" {
		t.Fatalf("wait: %d %s", status, body)
	}
	if out := guideRun(t, guideExample(t, "sessions.md#exec-cli"), vars); out != "hello\n" {
		t.Errorf("pt session exec: %q", out)
	}
	if status, body := guideCurl(t, guideExample(t, "sessions.md#status"), nil); status != 200 || jsonMap(body)["session_id"] != ses {
		t.Errorf("status lookup: %d %s", status, body)
	}
	if out := guideRun(t, guideExample(t, "sessions.md#status-cli"), nil); !strings.Contains(out, ses) {
		t.Errorf("pt session status: %s", out)
	}
	if status, body := guideCurl(t, guideExample(t, "sessions.md#stop"), vars); status != 200 || jsonMap(body)["status"] != "stopped" {
		t.Errorf("stop: %d %s", status, body)
	}

	t.Cleanup(func() { c.do("PUT", "/v1/pools/busybox", map[string]any{"min_ready": 0, "max": 0}) })
	guideRun(t, guideCommand(t, "sessions.md#pool-set", 0), nil)
	out := guideRun(t, guideCommand(t, "sessions.md#pool-set", 1), nil)
	if !regexp.MustCompile(`(?m)^busybox\s+runc\s+2\s+4\b`).MatchString(out) {
		t.Errorf("pt pool list after pt pool set busybox --min-ready 2 --max 4:\n%s", out)
	}
}

func TestGuideEventsAndWebhooks(t *testing.T) {
	c := newClient(t)
	type delivery struct {
		header http.Header
		body   []byte
	}
	got := make(chan delivery, 100)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- delivery{r.Header, b}
	}))
	defer rcv.Close()
	out := guideRun(t, guideExample(t, "events-and-webhooks.md#webhook-create"), map[string]string{"RECEIVER": rcv.URL})
	hook := idIn(t, `whk_\w+`, out)
	t.Cleanup(func() { c.do("DELETE", "/v1/webhooks/"+hook, nil) })
	if !strings.Contains(out, "secret: ") {
		t.Errorf("pt webhook create did not show the secret: %s", out)
	}

	id := guideSandbox(t, c, "busybox")
	vars := map[string]string{"SBX": id}
	status, body := guideCurl(t, guideExample(t, "events-and-webhooks.md#page"), vars)
	var page struct {
		Rows []struct {
			Type      string `json:"type"`
			SandboxID string `json:"sandbox_id"`
		} `json:"rows"`
		NextAfter int64 `json:"next_after"`
	}
	if err := json.Unmarshal(body, &page); status != 200 || err != nil || len(page.Rows) == 0 || page.NextAfter == 0 {
		t.Fatalf("events page: %d %s", status, body)
	}
	for _, e := range page.Rows {
		if e.Type != "state_changed" || e.SandboxID != id {
			t.Errorf("filtered page has %s of %s", e.Type, e.SandboxID)
		}
	}
	if out := guideRun(t, guideExample(t, "events-and-webhooks.md#cli"), vars); !strings.Contains(out, "running") {
		t.Errorf("pt events: %s", out)
	}
	deadline := time.After(time.Minute)
	for {
		select {
		case d := <-got:
			if d.header.Get("X-Pt-Event") == "state_changed" && strings.HasPrefix(d.header.Get("X-Pt-Signature"), "t=") &&
				d.header.Get("X-Pt-Webhook") == hook && strings.Contains(string(d.body), id) {
				return
			}
		case <-deadline:
			t.Fatal("no signed state_changed delivery of the sandbox within a minute")
		}
	}
}

func TestGuideExecAndFiles(t *testing.T) {
	c := newClient(t)
	id := guideSandbox(t, c, "busybox")
	vars := map[string]string{"SBX": id}
	status, body := guideCurl(t, guideExample(t, "exec-and-files.md#exec"), vars)
	if m := jsonMap(body); status != 200 || m["exit_code"] != 0.0 || m["stdout"] != "Linux\n" {
		t.Errorf("exec: %d %s", status, body)
	}
	if out := guideRun(t, guideExample(t, "exec-and-files.md#exec-cli"), vars); out != "hello from "+id+"\n" {
		t.Errorf("pt sandbox exec: %q", out)
	}
	if out := guideRun(t, guideExample(t, "exec-and-files.md#files-cli"), vars); out != "hello\n" {
		t.Errorf("pt sandbox cp there and back: %q", out)
	}
	if status, body := guideCurl(t, guideExample(t, "exec-and-files.md#files-read"), vars); status != 200 || string(body) != "hello\n" {
		t.Errorf("GET files: %d %q", status, body)
	}
	art := idIn(t, `art_\w+`, guideRun(t, guideCommand(t, "exec-and-files.md#artifact-cli", 0), vars))
	t.Cleanup(func() { c.do("DELETE", "/v1/artifacts/"+art, nil) })
	if out := guideRun(t, guideCommand(t, "exec-and-files.md#artifact-cli", 1), vars); !strings.Contains(out, art) || !strings.Contains(out, "notes") {
		t.Errorf("pt artifact list: %s", out)
	}
	if r := c.do("GET", "/v1/artifacts/"+art+"/content", nil); r.Status != 200 || string(r.Body) != "hello\n" {
		t.Errorf("artifact content: %d %q", r.Status, r.Body)
	}
}

func TestGuideCompatibility(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "pt-base")
	status, body := guideCurl(t, guideExample(t, "compatibility.md#e2b-create"), nil)
	m := jsonMap(body)
	id := deleteLater(t, c, m["sandboxID"], "/v1/sandboxes/%s")
	if status != 201 || m["templateID"] != "pt-base" || id == "" {
		t.Fatalf("E2B create: %d %s", status, body)
	}
	if sb := c.do("GET", "/v1/sandboxes/"+id, nil).JSON(); sb["template"] != "pt-base" || sb["expires_at"] == nil {
		t.Errorf("the E2B sandbox on /v1: %v", sb)
	}
}

func TestGuideAccess(t *testing.T) {
	c := newClient(t)
	status, body := guideCurl(t, guideExample(t, "access.md#create-org"), nil)
	m := jsonMap(body)
	org, _ := m["org"].(map[string]any)
	orgID, _ := org["id"].(string)
	orgToken, _ := m["token"].(string)
	if status != 201 || orgID == "" || orgToken == "" {
		t.Fatalf("create org: %d %s", status, body)
	}
	// The project examples run as the new org's admin.
	as := map[string]string{"PT_TOKEN": orgToken}
	guideRun(t, guideCommand(t, "access.md#project-cli", 0), as)
	out := guideRun(t, guideCommand(t, "access.md#project-cli", 1), as)
	prj := regexp.MustCompile(`(?m)^(prj_\w+)\s+ci\b`).FindStringSubmatch(out)
	if prj == nil {
		t.Fatalf("pt project list has no project ci:\n%s", out)
	}
	status, body = guideCurl(t, guideExample(t, "access.md#project-token"), map[string]string{"PT_TOKEN": orgToken, "PRJ": prj[1]})
	if m := jsonMap(body); status != 201 || m["project_id"] != prj[1] || m["role"] != "member" || m["token"] == nil {
		t.Errorf("project token: %d %s", status, body)
	}
	guideRun(t, guideExample(t, "access.md#quota-cli"), map[string]string{"ORG": orgID})
	q := c.do("GET", "/v1/orgs/"+orgID+"/quotas", nil)
	if !strings.Contains(string(q.Body), `"max_sandboxes":10`) || !strings.Contains(string(q.Body), `"max_cpu":16`) {
		t.Errorf("quotas after pt org quota: %d %s", q.Status, q.Body)
	}
}

func TestGuideOperating(t *testing.T) {
	newClient(t)
	status, body := guideCurl(t, guideExample(t, "operating.md#hosts"), nil)
	var hosts struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(body, &hosts); status != 200 || err != nil || len(hosts.Rows) != 1 {
		t.Fatalf("hosts: %d %s", status, body)
	}
}

// deleteLater returns id, a create's answer's ID field ("" when it has
// none), and deletes what it names, at fmt.Sprintf(route, id), when the
// test ends.
func deleteLater(t *testing.T, c *client, id any, route string) string {
	s, _ := id.(string)
	if s != "" {
		t.Cleanup(func() { c.do("DELETE", fmt.Sprintf(route, s), nil) })
	}
	return s
}
