// Package e2bcompat proves ptd's E2B surface against a real ptd: raw HTTP
// tests check the mapping without Node, and TestSDK runs the real `e2b`
// npm package (pinned in package.json / package-lock.json) with node
// --test against the same daemon, and TestPythonSDK the real `e2b` Python
// package (pinned in requirements.txt) with pytest, both configured only by
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY.
package e2bcompat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/runnercheck"
	"github.com/platinum-dev/platinum/internal/testenv"
)

// env is the one ptd every test of this package talks to.
var env struct {
	url, token string
	skip       string
}

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	env.skip = "E2B compatibility tests need root (they run real sandboxes)"
	// Both templates are built before any E2B create: a first pt-base
	// build (≈60 s) would outlast create's wait, which is the point of
	// that wait, not of these tests.
	o := ptdtest.Options{ExtraArgs: []string{"--pids-limit", "256"}, Warm: []string{"busybox", "pt-base"}}
	return ptdtest.Main(m, "e2b compat", o, func(d *ptdtest.Daemon) error {
		env.url, env.token, env.skip = d.URL, d.Token, ""
		return nil
	})
}

// client speaks E2B's control-plane API with one API key.
type client struct {
	t   *testing.T
	key string
}

func newClient(t *testing.T) *client {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	return &client{t: t, key: env.token}
}

type response = ptdtest.Response

func (c *client) do(method, path string, body any, hdr ...string) response {
	c.t.Helper()
	rd := ptdtest.Body(body)
	req, err := http.NewRequest(method, env.url+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.key != "" {
		req.Header.Set("X-API-KEY", c.key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	r, err := ptdtest.Send(nil, req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// created is the Sandbox answer of a create.
type created struct {
	SandboxID, TemplateID, EnvdVersion, EnvdAccessToken string
	Alias                                               string
}

// create makes a sandbox through POST /v2/sandboxes and kills it when the
// test ends.
func (c *client) create(body map[string]any) created {
	c.t.Helper()
	r := c.do("POST", "/v2/sandboxes", body)
	if r.Status != 201 {
		c.t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var s created
	if err := json.Unmarshal(r.Body, &s); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { c.do("DELETE", "/sandboxes/"+s.SandboxID, nil) })
	return s
}

// wantError checks an E2B error answer: the status and the same integer
// code in the body (the SDK branches on it), with a message.
func wantError(t *testing.T, r response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	m := r.JSON()
	if code, _ := m["code"].(float64); int(code) != status {
		t.Errorf("body code %v, want %d: %s", m["code"], status, r.Body)
	}
	if msg, _ := m["message"].(string); msg == "" {
		t.Errorf("body has no message: %s", r.Body)
	}
}

func parseTime(t *testing.T, v any) time.Time {
	t.Helper()
	s, _ := v.(string)
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return tm
}

func TestCreateGetListKill(t *testing.T) {
	c := newClient(t)
	tag := ptdtest.RandHex(4)
	before := time.Now()
	s := c.create(map[string]any{"templateID": "busybox", "timeout": 120,
		"metadata": map[string]string{"suite": tag, "k": "v w"}, "envVars": map[string]string{"FOO": "bar"}})
	if s.TemplateID != "busybox" || s.EnvdVersion != "0.5.7" || s.EnvdAccessToken == "" || !strings.HasPrefix(s.SandboxID, "sbx_") {
		t.Fatalf("create answer: %+v", s)
	}

	r := c.do("GET", "/sandboxes/"+s.SandboxID, nil)
	if r.Status != 200 {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}
	m := r.JSON()
	got := map[string]any{"sandboxID": m["sandboxID"], "templateID": m["templateID"], "state": m["state"],
		"metadata": m["metadata"], "envdAccessToken": m["envdAccessToken"], "cpuCount": m["cpuCount"], "memoryMB": m["memoryMB"],
		"lifecycle": m["lifecycle"]}
	want := map[string]any{"sandboxID": s.SandboxID, "templateID": "busybox", "state": "running",
		"metadata": map[string]any{"suite": tag, "k": "v w"}, "envdAccessToken": s.EnvdAccessToken,
		"cpuCount": float64(1), "memoryMB": float64(512), "lifecycle": map[string]any{"autoResume": false, "onTimeout": "kill"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("get (-want +got):\n%s", d)
	}
	// The TTL counts from when the sandbox was ready: 120 s after create.
	if end := parseTime(t, m["endAt"]); end.Before(before.Add(119*time.Second)) || end.After(time.Now().Add(121*time.Second)) {
		t.Errorf("endAt %v, want about 120 s after create (%v)", end, before)
	}

	// List with the SDK's metadata encoding: each key and value URI
	// encoded, joined as a query string, then encoded again as a param.
	md := "suite=" + tag + "&k=v%2520w"
	r = c.do("GET", "/v2/sandboxes?metadata="+urlQueryEscape(md), nil)
	if r.Status != 200 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	if ids := idsOf(r.List()); !slices.Equal(ids, []string{s.SandboxID}) {
		t.Errorf("list by metadata: %v, want [%s]", ids, s.SandboxID)
	}
	r = c.do("GET", "/v2/sandboxes?state=paused&metadata="+urlQueryEscape("suite="+tag), nil)
	if ids := idsOf(r.List()); len(ids) != 0 {
		t.Errorf("list paused: %v, want none", ids)
	}
	r = c.do("GET", "/sandboxes?metadata="+urlQueryEscape("suite="+tag), nil) // v1
	if ids := idsOf(r.List()); !slices.Equal(ids, []string{s.SandboxID}) {
		t.Errorf("v1 list: %v (%d %s)", ids, r.Status, r.Body)
	}

	if r := c.do("DELETE", "/sandboxes/"+s.SandboxID, nil); r.Status != 204 {
		t.Fatalf("kill: %d %s", r.Status, r.Body)
	}
	wantError(t, c.do("DELETE", "/sandboxes/"+s.SandboxID, nil), 404)
	wantError(t, c.do("GET", "/sandboxes/"+s.SandboxID, nil), 404)
	r = c.do("GET", "/v2/sandboxes?metadata="+urlQueryEscape("suite="+tag), nil)
	if ids := idsOf(r.List()); len(ids) != 0 {
		t.Errorf("list after kill: %v", ids)
	}
}

func urlQueryEscape(s string) string {
	return strings.NewReplacer("%", "%25", "&", "%26", "=", "%3D", " ", "%20", "+", "%2B").Replace(s)
}

func idsOf(l []map[string]any) []string {
	var ids []string
	for _, m := range l {
		ids = append(ids, m["sandboxID"].(string))
	}
	return ids
}

func TestCreateV1AndBaseAlias(t *testing.T) {
	c := newClient(t)
	r := c.do("POST", "/sandboxes", map[string]any{"templateID": "base", "secure": true})
	if r.Status != 201 {
		t.Fatalf("v1 create: %d %s", r.Status, r.Body)
	}
	m := r.JSON()
	id := m["sandboxID"].(string)
	t.Cleanup(func() { c.do("DELETE", "/sandboxes/"+id, nil) })
	if m["templateID"] != "pt-base" {
		t.Errorf("templateID %v, want pt-base (base is its alias)", m["templateID"])
	}
	// v1's default timeout is 15 s.
	g := c.do("GET", "/sandboxes/"+id, nil).JSON()
	if end := parseTime(t, g["endAt"]); end.After(time.Now().Add(16 * time.Second)) {
		t.Errorf("endAt %v: v1 default timeout is 15 s", end)
	}
}

// TestTemplateVersionID: a template's newest version ID is accepted as
// its templateID; an unknown one is 404.
func TestTemplateVersionID(t *testing.T) {
	c := newClient(t)
	r := c.do("GET", "/v1/templates/busybox", nil, "Authorization", "Bearer "+env.token)
	v, _ := r.JSON()["version_id"].(string)
	if !strings.HasPrefix(v, "tplv_") {
		t.Fatalf("busybox template: %d %s", r.Status, r.Body)
	}
	if s := c.create(map[string]any{"templateID": v}); s.TemplateID != "busybox" {
		t.Errorf("templateID of a create by version: %q", s.TemplateID)
	}
	wantError(t, c.do("POST", "/v2/sandboxes", map[string]any{"templateID": "tplv_01KA0000000000000000000000"}), 404)
}

func TestErrors(t *testing.T) {
	c := newClient(t)
	anon := &client{t: t}
	unknown := "sbx_01KA0000000000000000000000"
	for _, tc := range []struct {
		name         string
		c            *client
		method, path string
		body         any
		status       int
		msg          string
	}{
		{"no api key", anon, "GET", "/v2/sandboxes", nil, 401, "API key"},
		{"bad api key", &client{t: t, key: "pt_nope"}, "POST", "/v2/sandboxes", `{"templateID":"busybox"}`, 401, ""},
		{"malformed json", c, "POST", "/v2/sandboxes", `{"templateID":`, 400, "malformed"},
		{"wrong type", c, "POST", "/v2/sandboxes", `{"templateID":"busybox","timeout":"soon"}`, 400, "timeout"},
		{"no template", c, "POST", "/v2/sandboxes", `{}`, 400, "templateID"},
		{"unknown template", c, "POST", "/v2/sandboxes", `{"templateID":"no-such-template"}`, 404, "template 'no-such-template' not found"},
		{"negative timeout", c, "POST", "/v2/sandboxes", `{"templateID":"busybox","timeout":-1}`, 400, "timeout"},
		{"denyOut takes addresses", c, "POST", "/v2/sandboxes", `{"templateID":"busybox","network":{"denyOut":["example.com"]}}`, 400, "deny_out"},
		{"egress rules unsupported", c, "POST", "/v2/sandboxes", `{"templateID":"busybox","network":{"rules":{"api.example.com":{}}}}`, 400, "egress rules"},
		{"bad env key", c, "POST", "/v2/sandboxes", `{"templateID":"busybox","envVars":{"1x":"y"}}`, 400, "env"},
		{"get unknown", c, "GET", "/sandboxes/" + unknown, nil, 404, "not found"},
		{"get malformed id", c, "GET", "/sandboxes/nope", nil, 404, ""},
		{"kill unknown", c, "DELETE", "/sandboxes/" + unknown, nil, 404, ""},
		{"timeout unknown", c, "POST", "/sandboxes/" + unknown + "/timeout", `{"timeout":10}`, 404, ""},
		{"timeout missing", c, "POST", "/sandboxes/" + unknown + "/timeout", `{}`, 400, "timeout"},
		{"pause unknown", c, "POST", "/sandboxes/" + unknown + "/pause", `{}`, 404, ""},
		{"connect unknown", c, "POST", "/v2/sandboxes/" + unknown + "/connect", `{}`, 404, ""},
		{"connect v1 needs timeout", c, "POST", "/sandboxes/" + unknown + "/connect", `{}`, 400, "timeout"},
		{"metrics unknown", c, "GET", "/sandboxes/" + unknown + "/metrics", nil, 404, ""},
		{"list bad state", c, "GET", "/v2/sandboxes?state=sleeping", nil, 400, "state"},
		{"list bad limit", c, "GET", "/v2/sandboxes?limit=0", nil, 400, "limit"},
		{"list bad token", c, "GET", "/v2/sandboxes?nextToken=xyz", nil, 400, "nextToken"},
		{"snapshot unknown", c, "POST", "/sandboxes/" + unknown + "/snapshots", `{}`, 404, "not found"},
		{"fork unknown", c, "POST", "/sandboxes/" + unknown + "/fork", `{}`, 404, "not found"},
		{"network unknown", c, "PUT", "/sandboxes/" + unknown + "/network", `{}`, 404, "not found"},
		{"network rules unsupported", c, "PUT", "/sandboxes/" + unknown + "/network", `{"rules":{"a.com":[]}}`, 400, "not supported"},
		{"logs unsupported", c, "GET", "/sandboxes/" + unknown + "/logs", nil, 501, "not supported"},
		{"unknown route", c, "GET", "/sandboxes/" + unknown + "/nope", nil, 404, "no E2B route"},
		{"wrong method", c, "PATCH", "/v2/sandboxes", nil, 405, "not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.c.do(tc.method, tc.path, tc.body)
			wantError(t, r, tc.status)
			if !strings.Contains(string(r.Body), tc.msg) {
				t.Errorf("body %s does not mention %q", r.Body, tc.msg)
			}
		})
	}
	// Unauthenticated health, as on E2B; /v1 and /healthz are untouched.
	if r := anon.do("GET", "/health", nil); r.Status != 204 {
		t.Errorf("GET /health: %d", r.Status)
	}
	if r := anon.do("GET", "/healthz", nil); r.Status != 200 {
		t.Errorf("GET /healthz: %d %s", r.Status, r.Body)
	}
	if r := c.do("GET", "/v1/sandboxes", nil, "Authorization", "Bearer "+env.token); r.Status != 200 || !strings.Contains(string(r.Body), `"rows"`) {
		t.Errorf("GET /v1/sandboxes: %d %s", r.Status, r.Body)
	}
}

func TestTimeoutKills(t *testing.T) {
	c := newClient(t)
	s := c.create(map[string]any{"templateID": "busybox", "timeout": 300})
	if r := c.do("POST", "/sandboxes/"+s.SandboxID+"/timeout", map[string]any{"timeout": 1}); r.Status != 204 {
		t.Fatalf("timeout: %d %s", r.Status, r.Body)
	}
	g := c.do("GET", "/sandboxes/"+s.SandboxID, nil).JSON()
	if end := parseTime(t, g["endAt"]); end.After(time.Now().Add(2 * time.Second)) {
		t.Errorf("endAt %v after a 1 s timeout", end)
	}
	// The TTL timer deletes it: GET turns 404.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r := c.do("GET", "/sandboxes/"+s.SandboxID, nil)
		if r.Status == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox still there after its TTL: %d %s", r.Status, r.Body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestPauseConnect(t *testing.T) {
	c := newClient(t)
	s := c.create(map[string]any{"templateID": "busybox", "timeout": 300})
	ev := envdOf(t, s)
	ev.mustUpload("/tmp/keep.txt", "kept")
	if r := c.do("POST", "/sandboxes/"+s.SandboxID+"/pause", `{}`); r.Status != 204 {
		t.Fatalf("pause: %d %s", r.Status, r.Body)
	}
	wantError(t, c.do("POST", "/sandboxes/"+s.SandboxID+"/pause", `{}`), 409)
	g := c.do("GET", "/sandboxes/"+s.SandboxID, nil).JSON()
	if g["state"] != "paused" {
		t.Errorf("state after pause: %v", g["state"])
	}
	// A paused sandbox's envd looks dead, as behind E2B's proxy.
	if r := ev.unary("filesystem.Filesystem/Stat", `{"path":"/tmp"}`); r.Status != 502 || r.JSON()["code"] != "unavailable" {
		t.Errorf("envd while paused: %d %s", r.Status, r.Body)
	}
	// Paused sandboxes keep no running clock (E2B keeps them until killed).
	if end := parseTime(t, g["endAt"]); end.Before(time.Now().Add(24 * time.Hour)) {
		t.Errorf("endAt while paused %v, want none", end)
	}

	r := c.do("POST", "/v2/sandboxes/"+s.SandboxID+"/connect", `{"timeout":120}`)
	if r.Status != 201 {
		t.Fatalf("connect paused: %d %s", r.Status, r.Body)
	}
	m := r.JSON()
	t.Logf("resume restored %v (ramRestored %v)", m["restore"], m["ramRestored"])
	if m["restore"] != "memory" && m["restore"] != "disk_only" {
		t.Errorf("connect answer restore %v", m["restore"])
	}
	if _, ok := m["ramRestored"].(bool); !ok {
		t.Errorf("connect answer ramRestored %v", m["ramRestored"])
	}
	if m["envdAccessToken"] != s.EnvdAccessToken {
		t.Errorf("access token changed across pause")
	}
	if b := ev.download("/tmp/keep.txt"); b != "kept" {
		t.Errorf("file after resume: %q", b)
	}
	if r := c.do("POST", "/v2/sandboxes/"+s.SandboxID+"/connect", `{}`); r.Status != 200 {
		t.Errorf("connect running: %d %s", r.Status, r.Body)
	}
	g = c.do("GET", "/sandboxes/"+s.SandboxID, nil).JSON()
	if end := parseTime(t, g["endAt"]); end.After(time.Now().Add(301*time.Second)) || end.Before(time.Now().Add(200*time.Second)) {
		t.Errorf("endAt after connect {} %v: want now+300 s (connect extends)", end)
	}
	if r := c.do("POST", "/sandboxes/"+s.SandboxID+"/resume", `{}`); r.Status != 409 {
		t.Errorf("resume running: %d %s", r.Status, r.Body)
	}
}

// TestAutoPause: a sandbox made with autoPause is paused, not killed,
// when its timeout runs out, and keeps pausing after a resume.
func TestAutoPause(t *testing.T) {
	c := newClient(t)
	s := c.create(map[string]any{"templateID": "busybox", "timeout": 1, "autoPause": true})
	deadline := time.Now().Add(2 * time.Minute)
	var g map[string]any
	for {
		g = c.do("GET", "/sandboxes/"+s.SandboxID, nil).JSON()
		if g["state"] == "paused" {
			break
		}
		if g["state"] != "running" || time.Now().After(deadline) {
			t.Fatalf("waiting for the auto-pause: %v", g)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if lc, _ := g["lifecycle"].(map[string]any); lc["onTimeout"] != "pause" {
		t.Errorf("lifecycle while auto-paused: %v", g["lifecycle"])
	}
	if r := c.do("POST", "/v2/sandboxes/"+s.SandboxID+"/connect", `{"timeout":600}`); r.Status != 201 {
		t.Fatalf("connect: %d %s", r.Status, r.Body)
	}
	g = c.do("GET", "/sandboxes/"+s.SandboxID, nil).JSON()
	if lc, _ := g["lifecycle"].(map[string]any); g["state"] != "running" || lc["onTimeout"] != "pause" {
		t.Errorf("after resume: state %v lifecycle %v", g["state"], g["lifecycle"])
	}
	if end := parseTime(t, g["endAt"]); end.Before(time.Now().Add(500 * time.Second)) {
		t.Errorf("endAt after connect {timeout:600}: %v", end)
	}
	if r := c.do("POST", "/sandboxes/"+s.SandboxID+"/pause", `{}`); r.Status != 204 {
		t.Fatalf("pause: %d %s", r.Status, r.Body)
	}
	// A paused sandbox can be killed.
	if r := c.do("DELETE", "/sandboxes/"+s.SandboxID, nil); r.Status != 204 {
		t.Errorf("kill paused: %d %s", r.Status, r.Body)
	}
}

func TestPauseDiskOnly(t *testing.T) {
	c := newClient(t)
	s := c.create(map[string]any{"templateID": "busybox"})
	if r := c.do("POST", "/sandboxes/"+s.SandboxID+"/pause", `{"memory":false}`); r.Status != 204 {
		t.Fatalf("pause: %d %s", r.Status, r.Body)
	}
	r := c.do("POST", "/v2/sandboxes/"+s.SandboxID+"/connect", `{}`)
	if m := r.JSON(); r.Status != 201 || m["restore"] != "disk_only" || m["ramRestored"] != false {
		t.Errorf("connect after a disk-only pause: %d %s", r.Status, r.Body)
	}
}

// TestAutoResume: envd traffic to a paused sandbox made with autoResume
// resumes it; without autoResume it stays paused and answers 502.
func TestAutoResume(t *testing.T) {
	c := newClient(t)
	auto := c.create(map[string]any{"templateID": "busybox", "autoPause": true, "autoResume": map[string]any{"enabled": true}})
	plain := c.create(map[string]any{"templateID": "busybox"})
	for _, s := range []created{auto, plain} {
		if r := c.do("POST", "/sandboxes/"+s.SandboxID+"/pause", `{}`); r.Status != 204 {
			t.Fatalf("pause: %d %s", r.Status, r.Body)
		}
	}
	if lc, _ := c.do("GET", "/sandboxes/"+auto.SandboxID, nil).JSON()["lifecycle"].(map[string]any); lc["autoResume"] != true {
		t.Errorf("lifecycle of an autoResume sandbox: %v", lc)
	}
	// A health probe does not wake it.
	ev := envdOf(t, auto)
	if r := ev.do(ev.req("GET", "/health", nil)); r.Status != 502 {
		t.Errorf("/health of a paused sandbox: %d", r.Status)
	}
	if r := ev.unary("filesystem.Filesystem/Stat", `{"path":"/tmp"}`); r.Status != 200 {
		t.Errorf("Stat on a paused autoResume sandbox: %d %s", r.Status, r.Body)
	}
	if g := c.do("GET", "/sandboxes/"+auto.SandboxID, nil).JSON(); g["state"] != "running" {
		t.Errorf("state after traffic: %v", g["state"])
	}
	pev := envdOf(t, plain)
	if r := pev.unary("filesystem.Filesystem/Stat", `{"path":"/tmp"}`); r.Status != 502 {
		t.Errorf("Stat on a paused sandbox without autoResume: %d %s", r.Status, r.Body)
	}
	if g := c.do("GET", "/sandboxes/"+plain.SandboxID, nil).JSON(); g["state"] != "paused" {
		t.Errorf("state of the plain one after traffic: %v", g["state"])
	}
}

func TestMetrics(t *testing.T) {
	c := newClient(t)
	s := c.create(map[string]any{"templateID": "busybox"})
	r := c.do("GET", "/sandboxes/"+s.SandboxID+"/metrics", nil)
	l := r.List()
	if r.Status != 200 || len(l) != 1 {
		t.Fatalf("metrics: %d %s", r.Status, r.Body)
	}
	// Figures are the sandbox's own (cgroup limit, its disk), not the host's.
	if l[0]["memTotal"] != float64(512<<20) || l[0]["cpuCount"] != float64(1) {
		t.Errorf("memTotal %v cpuCount %v, want 512 MiB and 1 (the sandbox's size)", l[0]["memTotal"], l[0]["cpuCount"])
	}
	for _, k := range []string{"memUsed", "diskTotal"} {
		if v, _ := l[0][k].(float64); v <= 0 {
			t.Errorf("metric %s = %v", k, l[0][k])
		}
	}
	parseTime(t, l[0]["timestamp"])
	r = c.do("GET", "/sandboxes/metrics?sandbox_ids="+s.SandboxID, nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), s.SandboxID) {
		t.Errorf("batch metrics: %d %s", r.Status, r.Body)
	}
}

func TestListPages(t *testing.T) {
	c := newClient(t)
	tag := ptdtest.RandHex(4)
	var want []string
	for i := 0; i < 3; i++ {
		want = append(want, c.create(map[string]any{"templateID": "busybox", "metadata": map[string]string{"page": tag}}).SandboxID)
	}
	slices.Reverse(want) // newest first
	var got []string
	token := ""
	for pages := 0; pages < 5; pages++ {
		path := "/v2/sandboxes?limit=2&metadata=" + urlQueryEscape("page="+tag)
		if token != "" {
			path += "&nextToken=" + token
		}
		r := c.do("GET", path, nil)
		if r.Status != 200 {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		got = append(got, idsOf(r.List())...)
		if token = r.Header.Get("X-Next-Token"); token == "" {
			break
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("pages (-want +got):\n%s", d)
	}
	r := c.do("GET", "/v2/sandboxes?order=asc&template=busybox&metadata="+urlQueryEscape("page="+tag), nil)
	slices.Reverse(want)
	if d := cmp.Diff(want, idsOf(r.List())); d != "" {
		t.Errorf("asc (-want +got):\n%s", d)
	}
	if r := c.do("GET", "/v2/sandboxes?template=base&metadata="+urlQueryEscape("page="+tag), nil); len(r.List()) != 0 {
		t.Errorf("template filter: %s", r.Body)
	}
}

func TestCrossOrg404(t *testing.T) {
	c := newClient(t)
	s := c.create(map[string]any{"templateID": "busybox", "metadata": map[string]string{"org": "one"}})
	r := c.do("POST", "/v1/orgs", map[string]any{"name": "e2b-other-" + ptdtest.RandHex(3)}, "Authorization", "Bearer "+env.token, "X-API-KEY", "")
	if r.Status != 201 {
		t.Fatalf("create org: %d %s", r.Status, r.Body)
	}
	tok, _ := r.JSON()["token"].(string)
	if tok == "" {
		t.Fatalf("org answer has no token: %s", r.Body)
	}
	other := &client{t: t, key: tok}
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/sandboxes/" + s.SandboxID, ""},
		{"DELETE", "/sandboxes/" + s.SandboxID, ""},
		{"POST", "/sandboxes/" + s.SandboxID + "/timeout", `{"timeout":1}`},
		{"POST", "/sandboxes/" + s.SandboxID + "/pause", `{}`},
		{"POST", "/v2/sandboxes/" + s.SandboxID + "/connect", `{}`},
		{"GET", "/sandboxes/" + s.SandboxID + "/metrics", ""},
	} {
		var body any
		if tc.body != "" {
			body = tc.body
		}
		wantError(t, other.do(tc.method, tc.path, body), 404)
	}
	if ids := idsOf(other.do("GET", "/v2/sandboxes", nil).List()); slices.Contains(ids, s.SandboxID) {
		t.Errorf("other org lists %s", s.SandboxID)
	}
	if g := c.do("GET", "/sandboxes/"+s.SandboxID, nil).JSON(); g["state"] != "running" {
		t.Errorf("sandbox after the other org's attempts: %v", g)
	}
}

// envd talks to one sandbox's pt-agent through ptd, as the SDK does.
type envd struct {
	t         *testing.T
	id, token string
}

// envdOf is the envd of a sandbox the test created.
func envdOf(t *testing.T, s created) envd {
	return envd{t: t, id: s.SandboxID, token: s.EnvdAccessToken}
}

func (e envd) req(method, path string, body io.Reader, hdr ...string) *http.Request {
	req, err := http.NewRequest(method, env.url+"/"+strings.TrimPrefix(path, "/"), body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("E2b-Sandbox-Id", e.id)
	req.Header.Set("E2b-Sandbox-Port", "49983")
	if e.token != "" {
		req.Header.Set("X-Access-Token", e.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req
}

func (e envd) do(req *http.Request) response {
	e.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func (e envd) unary(method, body string) response {
	e.t.Helper()
	return e.do(e.req("POST", method, strings.NewReader(body), "Content-Type", "application/json", "Connect-Protocol-Version", "1"))
}

func (e envd) upload(path, data string) response {
	e.t.Helper()
	return e.do(e.req("POST", "/files?path="+path, strings.NewReader(data), "Content-Type", "application/octet-stream"))
}

// mustUpload is upload, failing the test unless it answers 200.
func (e envd) mustUpload(path, data string) {
	e.t.Helper()
	if r := e.upload(path, data); r.Status != 200 {
		e.t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
}

func (e envd) download(path string) string {
	e.t.Helper()
	r := e.do(e.req("GET", "/files?path="+path, nil))
	if r.Status != 200 {
		e.t.Fatalf("download %s: %d %s", path, r.Status, r.Body)
	}
	return string(r.Body)
}

// envelope frames one Connect streaming message.
func envelope(flags byte, payload string) []byte {
	b := make([]byte, 5, 5+len(payload))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

// readEnvelope reads one Connect streaming message.
func readEnvelope(r *bufio.Reader) (flags byte, payload []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	payload = make([]byte, binary.BigEndian.Uint32(hdr[1:]))
	_, err = io.ReadFull(r, payload)
	return hdr[0], payload, err
}

// startStream starts a process with the server-streaming Start RPC.
func (e envd) startStream(ctx context.Context, script string) (*bufio.Reader, func()) {
	e.t.Helper()
	msg, _ := json.Marshal(map[string]any{"process": map[string]any{"cmd": "/bin/sh", "args": []string{"-c", script}}, "stdin": false})
	req := e.req("POST", "/process.Process/Start", bytes.NewReader(envelope(0, string(msg))),
		"Content-Type", "application/connect+json", "Connect-Protocol-Version", "1", "Connect-Timeout-Ms", "60000")
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e.t.Fatalf("Start: %d %s", resp.StatusCode, b)
	}
	return bufio.NewReader(resp.Body), func() { resp.Body.Close() }
}

// processEvent is one StartResponse in proto3 JSON.
type processEvent struct {
	Event struct {
		Start *struct{ Pid uint32 }
		Data  *struct{ Stdout, Stderr string }
		End   *struct {
			ExitCode int32 `json:"exitCode"`
			Exited   bool
			Status   string
		}
	}
}

func TestEnvdRouting(t *testing.T) {
	c := newClient(t)
	s := c.create(map[string]any{"templateID": "busybox", "envVars": map[string]string{"FOO": "bar"}})
	ev := envdOf(t, s)

	// Connect JSON unary.
	r := ev.unary("filesystem.Filesystem/Stat", `{"path":"/tmp"}`)
	if r.Status != 200 {
		t.Fatalf("Stat: %d %s", r.Status, r.Body)
	}
	var st struct {
		Entry struct{ Name, Type, Path string }
	}
	json.Unmarshal(r.Body, &st)
	if st.Entry.Type != "FILE_TYPE_DIRECTORY" || st.Entry.Path != "/tmp" {
		t.Errorf("Stat /tmp: %s", r.Body)
	}
	if r := ev.unary("filesystem.Filesystem/Stat", `{"path":"/nope"}`); r.Status != 404 || r.JSON()["code"] != "not_found" {
		t.Errorf("Stat missing: %d %s", r.Status, r.Body)
	}

	// Credentials and dead sandboxes, in the shape each client parses.
	bad := envd{t: t, id: s.SandboxID, token: "wrong"}
	if r := bad.unary("filesystem.Filesystem/Stat", `{"path":"/"}`); r.Status != 401 || r.JSON()["code"] != "unauthenticated" {
		t.Errorf("RPC with a wrong token: %d %s", r.Status, r.Body)
	}
	if r := bad.do(bad.req("GET", "/envs", nil)); r.Status != 401 || r.JSON()["code"] != float64(401) {
		t.Errorf("/envs with a wrong token: %d %s", r.Status, r.Body)
	}
	none := envd{t: t, id: s.SandboxID}
	if r := none.do(none.req("GET", "/health", nil)); r.Status != 204 {
		t.Errorf("/health without a token: %d %s", r.Status, r.Body)
	}
	ghost := envd{t: t, id: "sbx_01KA0000000000000000000000", token: "x"}
	if r := ghost.unary("filesystem.Filesystem/Stat", `{"path":"/"}`); r.Status != 502 || r.JSON()["code"] != "unavailable" {
		t.Errorf("RPC to an unknown sandbox: %d %s", r.Status, r.Body)
	}
	if r := ghost.do(ghost.req("GET", "/health", nil)); r.Status != 502 {
		t.Errorf("/health of an unknown sandbox: %d %s", r.Status, r.Body)
	}
	if r := ev.do(ev.req("POST", "/init", strings.NewReader(`{"accessToken":"mine"}`))); r.Status != 404 {
		t.Errorf("/init from outside: %d %s", r.Status, r.Body)
	}

	// Plain envd endpoints.
	if r := ev.do(ev.req("GET", "/envs", nil)); r.Status != 200 || r.JSON()["FOO"] != "bar" {
		t.Errorf("/envs: %d %s", r.Status, r.Body)
	}
	ev.mustUpload("/tmp/x.txt", "hello")
	if b := ev.download("/tmp/x.txt"); b != "hello" {
		t.Errorf("download: %q", b)
	}

	// Server streaming: events arrive as they happen, not at the end. The
	// process prints, then waits for a file only this test creates after
	// reading that output: a buffering proxy would deadlock here (the
	// context deadline turns that into a failure).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rd, closeStream := ev.startStream(ctx, "echo first; echo oops >&2; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo second; exit 3")
	defer closeStream()
	var stdout, stderr strings.Builder
	var pid uint32
	var end *processEvent
	released := false
	for end == nil {
		flags, payload, err := readEnvelope(rd)
		if err != nil {
			t.Fatalf("stream: %v (stdout so far %q)", err, stdout.String())
		}
		if flags&2 != 0 {
			t.Fatalf("stream ended without an end event: %s", payload)
		}
		var pe processEvent
		if err := json.Unmarshal(payload, &pe); err != nil {
			t.Fatalf("event %s: %v", payload, err)
		}
		switch e := pe.Event; {
		case e.Start != nil:
			pid = e.Start.Pid
		case e.Data != nil:
			out, _ := base64.StdEncoding.DecodeString(e.Data.Stdout)
			errOut, _ := base64.StdEncoding.DecodeString(e.Data.Stderr)
			stdout.Write(out)
			stderr.Write(errOut)
		case e.End != nil:
			end = &pe
		}
		if !released && strings.Contains(stdout.String(), "first\n") {
			released = true
			if r := ev.upload("/tmp/go", ""); r.Status != 200 {
				t.Fatalf("release: %d %s", r.Status, r.Body)
			}
		}
	}
	if pid == 0 {
		t.Errorf("no start event with a pid")
	}
	if stdout.String() != "first\nsecond\n" || stderr.String() != "oops\n" {
		t.Errorf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	if end.Event.End.ExitCode != 3 || !end.Event.End.Exited {
		t.Errorf("end event: %+v", end.Event.End)
	}
	flags, payload, err := readEnvelope(rd)
	if err != nil || flags&2 == 0 || strings.TrimSpace(string(payload)) != "{}" {
		t.Errorf("end of stream: flags %d %q %v", flags, payload, err)
	}
}

func TestPortRouting(t *testing.T) {
	c := newClient(t)
	s := c.create(map[string]any{"templateID": "busybox"})
	ev := envdOf(t, s)
	ev.mustUpload("/tmp/www/index.html", "served from the sandbox")
	r := ev.unary("process.Process/List", `{}`)
	if r.Status != 200 {
		t.Fatalf("List: %d %s", r.Status, r.Body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, closeStream := ev.startStream(ctx, "exec busybox httpd -f -p 8080 -h /tmp/www")
	defer closeStream()
	port := envdOf(t, s)
	var last response
	for i := 0; i < 100; i++ {
		last = port.do(port.req("GET", "/index.html", nil, "E2b-Sandbox-Port", "8080"))
		if last.Status == 200 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last.Status != 200 || string(last.Body) != "served from the sandbox" {
		t.Errorf("port 8080: %d %s", last.Status, last.Body)
	}
	anon := envd{t: t, id: s.SandboxID}
	if r := anon.do(anon.req("GET", "/index.html", nil, "E2b-Sandbox-Port", "8080")); r.Status != 401 {
		t.Errorf("port 8080 without a token: %d %s", r.Status, r.Body)
	}
}

// TestSDK runs the real e2b SDK's test scripts (*.test.mjs) with node.
func TestSDK(t *testing.T) {
	if env.skip != "" {
		t.Skip(env.skip)
	}
	node := testenv.RequiresNode(t, ".", "e2b")
	files, _ := filepath.Glob("*.test.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"--test", "--test-reporter=spec"}, files...)...)
	cmd.Env = append(os.Environ(), "E2B_API_URL="+env.url, "E2B_SANDBOX_URL="+env.url, "E2B_API_KEY="+env.token, "E2B_DEBUG=")
	// Every test passed, at least one, none skipped.
	runnercheck.Run(t, "node --test", cmd, runnercheck.NodeTest)
}

// TestSnapshotsAndFork drives E2B's snapshot and fork routes with raw
// HTTP: a snapshot is a template (create from its ID clones it), lists
// page with X-Next-Token, forks are running sandboxes of their own, and
// DELETE /templates/:id deletes a snapshot once.
func TestSnapshotsAndFork(t *testing.T) {
	c := newClient(t)
	s := c.create(map[string]any{"templateID": "busybox", "timeout": 300})
	ev := envdOf(t, s)
	ev.mustUpload("/root/snap.txt", "one")
	var snaps []string
	for _, name := range []string{"first", "second"} {
		r := c.do("POST", "/sandboxes/"+s.SandboxID+"/snapshots", map[string]any{"name": name})
		if r.Status != 201 {
			t.Fatalf("snapshot: %d %s", r.Status, r.Body)
		}
		m := r.JSON()
		id, _ := m["snapshotID"].(string)
		if !strings.HasPrefix(id, "snap_") || fmt.Sprint(m["names"]) != "["+name+"]" {
			t.Fatalf("snapshot answer %s", r.Body)
		}
		snaps = append(snaps, id)
		t.Cleanup(func() { c.do("DELETE", "/templates/"+id, nil) })
		ev.upload("/root/snap.txt", "two")
	}
	// Two pages of one, newest first.
	r := c.do("GET", "/snapshots?sandboxID="+s.SandboxID+"&limit=1", nil)
	next := r.Header.Get("X-Next-Token")
	if r.Status != 200 || len(r.List()) != 1 || r.List()[0]["snapshotID"] != snaps[1] || next == "" {
		t.Fatalf("first page: %d %s (next %q)", r.Status, r.Body, next)
	}
	r = c.do("GET", "/snapshots?sandboxID="+s.SandboxID+"&limit=1&nextToken="+next, nil)
	if r.Status != 200 || len(r.List()) != 1 || r.List()[0]["snapshotID"] != snaps[0] {
		t.Fatalf("second page: %d %s", r.Status, r.Body)
	}
	wantError(t, c.do("GET", "/snapshots?nextToken=snap_nope", nil), 400)

	clone := c.create(map[string]any{"templateID": snaps[0], "timeout": 120})
	if got := (envdOf(t, clone)).download("/root/snap.txt"); got != "one" {
		t.Errorf("clone of the first snapshot has %q", got)
	}

	r = c.do("POST", "/sandboxes/"+s.SandboxID+"/fork", map[string]any{"count": 2, "timeout": 120})
	if r.Status != 201 {
		t.Fatalf("fork: %d %s", r.Status, r.Body)
	}
	var forks []struct {
		Sandbox *created
		Error   *struct{ Code int }
	}
	if err := json.Unmarshal(r.Body, &forks); err != nil || len(forks) != 2 {
		t.Fatalf("fork answer %s (%v)", r.Body, err)
	}
	for _, f := range forks {
		if f.Sandbox == nil {
			t.Fatalf("a fork failed: %s", r.Body)
		}
		id := f.Sandbox.SandboxID
		t.Cleanup(func() { c.do("DELETE", "/sandboxes/"+id, nil) })
		if id == s.SandboxID || f.Sandbox.EnvdAccessToken == s.EnvdAccessToken {
			t.Errorf("fork %s shares the source's id or token", id)
		}
		if got := (envd{t: t, id: id, token: f.Sandbox.EnvdAccessToken}).download("/root/snap.txt"); got != "two" {
			t.Errorf("fork %s has %q", id, got)
		}
	}
	// The source can be killed while its forks live: they are not its
	// children.
	if r := c.do("DELETE", "/sandboxes/"+s.SandboxID, nil); r.Status != 204 {
		t.Errorf("kill the fork source: %d %s", r.Status, r.Body)
	}

	if r := c.do("DELETE", "/templates/"+snaps[0], nil); r.Status != 204 {
		t.Errorf("delete snapshot: %d %s", r.Status, r.Body)
	}
	wantError(t, c.do("DELETE", "/templates/"+snaps[0], nil), 404)
	wantError(t, c.do("POST", "/v2/sandboxes", map[string]any{"templateID": snaps[0]}), 404)
	wantError(t, c.do("POST", "/sandboxes/sbx_01KA0000000000000000000000/fork", `{}`), 404)
	wantError(t, c.do("POST", "/sandboxes/"+clone.SandboxID+"/fork", `{"count":0}`), 400)
}

// TestPythonSDK runs the real `e2b` Python SDK (pinned in requirements.txt,
// installed into .venv by scripts/test.sh) through the main cases with
// pytest, configured by the same variables as the npm SDK.
func TestPythonSDK(t *testing.T) {
	if env.skip != "" {
		t.Skip(env.skip)
	}
	py := testenv.RequiresVenv(t, ".")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "pytest", "-v", "-p", "no:cacheprovider", "test_python_sdk.py")
	cmd.Env = append(os.Environ(), "E2B_API_URL="+env.url, "E2B_SANDBOX_URL="+env.url, "E2B_API_KEY="+env.token, "E2B_DEBUG=")
	// At least one test passed, none failed, errored or skipped.
	runnercheck.Run(t, "pytest", cmd, runnercheck.Pytest)
}
