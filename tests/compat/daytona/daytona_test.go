// Package daytonacompat proves ptd's Daytona surface against a real ptd:
// raw HTTP tests check the mapping without Node, and TestSDK runs the real
// Daytona npm SDK — under both its names, @daytonaio/sdk and @daytona/sdk,
// pinned in package.json / package-lock.json — with node --test against
// the same daemon, configured only by DAYTONA_API_URL and DAYTONA_API_KEY.
// The Daytona surface is outside api/openapi.yaml: these SDKs are its
// contract (docs/testing.md).
package daytonacompat

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/testenv"
)

// env is the one ptd every test of this package talks to.
var env struct {
	url, token, previewURL, dataDir string
	skip                            string
}

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	env.skip = "Daytona compatibility tests need root (they run real sandboxes)"
	// The templates are built before any create: a first build outlasts
	// create's wait, which is the point of that wait, not of these tests.
	// python-node has python3, node and git; code-interpreter has the
	// kernels codeRun and the interpreter run on.
	o := ptdtest.Options{ExtraArgs: []string{"--pids-limit", "256"},
		Warm: []string{"busybox", "pt-base", "python-node", "code-interpreter"}}
	return ptdtest.Main(m, "daytona compat", o, func(d *ptdtest.Daemon) error {
		env.url, env.token, env.previewURL, env.dataDir, env.skip = d.URL, d.Token, d.PreviewURL, d.DataDir, ""
		return nil
	})
}

type response = ptdtest.Response

func do(method, path string, body any) (response, error) {
	return doToken(env.token, method, path, body)
}

func doToken(token, method, path string, body any) (response, error) {
	req, _ := http.NewRequest(method, env.url+path, ptdtest.JSONBody(body))
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return ptdtest.Send(nil, req)
}

func need(t *testing.T) {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
}

func mustDo(t *testing.T, method, path string, body any) response {
	t.Helper()
	r, err := do(method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// wantError checks Daytona's error body: statusCode, error (reason
// phrase), message, path, timestamp.
func wantError(t *testing.T, r response, status int) {
	t.Helper()
	m := r.JSON()
	if r.Status != status || m["statusCode"] != float64(status) || m["error"] != http.StatusText(status) ||
		m["message"] == "" || m["path"] == "" || m["timestamp"] == "" {
		t.Errorf("want a %d Daytona error body, got %d %s", status, r.Status, r.Body)
	}
}

// TestErrorsAndOrgs: unknown ids, malformed input and another org's
// sandbox answer Daytona's error bodies, and a refused create makes
// nothing.
func TestErrorsAndOrgs(t *testing.T) {
	need(t)
	wantError(t, mustDo(t, "GET", "/daytona/api/sandbox/sbx_nope", nil), 404)
	wantError(t, mustDo(t, "GET", "/daytona/api/sandbox/no-such-name", nil), 404)
	r, _ := doToken("wrong", "GET", "/daytona/api/sandbox", nil)
	wantError(t, r, 401)
	before := mustDo(t, "GET", "/v1/sandboxes", nil).JSON()["total"]
	for _, body := range []map[string]any{
		{"snapshot": "busybox", "volumes": []any{map[string]any{"volumeId": "v", "mountPath": "/v"}}},
		{"snapshot": "busybox", "gpuType": []string{"H100"}},
		{"snapshot": "busybox", "user": "daytona"},
		{"snapshot": "busybox", "outboundProxyUrl": "http://proxy.example:3128"},
		{"snapshot": "busybox", "kvm": true},
		{"snapshot": "busybox", "linkedSandbox": "sbx_x"},
		{"snapshot": "busybox", "networkAllowList": "10.0.0.1"},
		{"snapshot": "busybox", "networkAllowList": "10.0.0.0/8,10.0.0.1/32,10.0.0.2/32,10.0.0.3/32,10.0.0.4/32,10.0.0.5/32,10.0.0.6/32,10.0.0.7/32,10.0.0.8/32,10.0.0.9/32,10.0.0.10/32"},
		{"snapshot": "busybox", "autoStopInterval": -1},
		{"snapshot": "busybox", "labels": map[string]string{"daytona.public": "x"}},
		{"buildInfo": map[string]any{"dockerfileContent": "FROM python:3.12\nRUN pip install x\n"}},
	} {
		wantError(t, mustDo(t, "POST", "/daytona/api/sandbox", body), 400)
	}
	// GPUs this host does not have: 409, naming what it has.
	for _, body := range []map[string]any{{"snapshot": "busybox", "gpu": 1}, {"snapshot": "busybox", "gpu": 1, "gpuType": []string{"H100", "RTX-4090"}}} {
		r := mustDo(t, "POST", "/daytona/api/sandbox", body)
		if wantError(t, r, 409); !strings.Contains(r.JSON()["message"].(string), "GPU") {
			t.Errorf("GPUs the host lacks: %s", r.Body)
		}
	}
	wantError(t, mustDo(t, "POST", "/daytona/api/sandbox", map[string]any{"snapshot": "no-such-template"}), 404)
	wantError(t, mustDo(t, "POST", "/daytona/api/sandbox", map[string]any{"buildInfo": map[string]any{"dockerfileContent": "FROM ubuntu:24.04\n"}}), 404)
	if after := mustDo(t, "GET", "/v1/sandboxes", nil).JSON()["total"]; after != before {
		t.Errorf("refused creates made sandboxes: %v → %v", before, after)
	}

	// Another org's token sees none of ours.
	r = mustDo(t, "POST", "/daytona/api/sandbox", map[string]any{"snapshot": "busybox", "labels": map[string]string{"t": "orgs"}})
	if r.Status != 200 || r.JSON()["state"] != "started" {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := r.JSON()["id"].(string)
	t.Cleanup(func() { do("DELETE", "/daytona/api/sandbox/"+id, nil) })
	org := mustDo(t, "POST", "/v1/orgs", map[string]any{"name": "daytona-other-" + ptdtest.RandHex(4)})
	other, _ := org.JSON()["token"].(string)
	if other == "" {
		t.Fatalf("new org: %d %s", org.Status, org.Body)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/daytona/api/sandbox/" + id}, {"POST", "/daytona/api/sandbox/" + id + "/stop"},
		{"DELETE", "/daytona/api/sandbox/" + id}, {"POST", "/daytona/toolbox/" + id + "/process/execute"},
	} {
		r, _ := doToken(other, c.method, c.path, map[string]any{"command": "true"})
		if r.Status != 404 {
			t.Errorf("%s %s with another org's token: %d %s", c.method, c.path, r.Status, r.Body)
		}
	}
	// Over the org's quota: 429 (DaytonaRateLimitError), with Retry-After.
	orgID, _ := org.JSON()["org"].(map[string]any)["id"].(string)
	if r := mustDo(t, "PUT", "/v1/orgs/"+orgID+"/quotas", map[string]any{"max_sandboxes": 1}); r.Status != 200 {
		t.Fatalf("quota: %d %s", r.Status, r.Body)
	}
	r, _ = doToken(other, "POST", "/daytona/api/sandbox", map[string]any{"snapshot": "busybox"})
	if r.Status != 200 {
		t.Fatalf("create in the other org: %d %s", r.Status, r.Body)
	}
	otherID := r.JSON()["id"].(string)
	t.Cleanup(func() { doToken(other, "DELETE", "/daytona/api/sandbox/"+otherID, nil) })
	r, _ = doToken(other, "POST", "/daytona/api/sandbox", map[string]any{"snapshot": "busybox"})
	wantError(t, r, 429)
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}

	// The toolbox reaches only the toolbox's routes on pt-agent.
	for _, p := range []string{"/daytona/toolbox/" + id + "/../init", "/daytona/toolbox/" + id + "/files/../../init"} {
		req, _ := http.NewRequest("POST", env.url+p, strings.NewReader(`{"accessToken":"x"}`))
		req.URL.Opaque = p // sent as is, not cleaned by the client
		req.Header.Set("Authorization", "Bearer "+env.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("POST %s: %d, want 400", p, resp.StatusCode)
		}
	}
	if r := mustDo(t, "POST", "/daytona/toolbox/"+id+"/process/execute", map[string]any{"command": "echo still"}); r.Status != 200 || r.JSON()["result"] != "still\n" {
		t.Errorf("execute after the refused paths: %d %s", r.Status, r.Body)
	}

	// Wrong-state answers: stop of a stopped sandbox is 400, archive of a
	// started one is 400.
	wantError(t, mustDo(t, "POST", "/daytona/api/sandbox/"+id+"/archive", nil), 400)
	if r := mustDo(t, "POST", "/daytona/api/sandbox/"+id+"/stop?force=false", nil); r.Status != 200 || r.JSON()["state"] != "stopped" {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
	wantError(t, mustDo(t, "POST", "/daytona/api/sandbox/"+id+"/stop?force=false", nil), 400)
	r = mustDo(t, "POST", "/daytona/toolbox/"+id+"/process/execute", map[string]any{"command": "true"})
	if r.Status != 400 || r.JSON()["source"] != "DAYTONA_DAEMON" {
		t.Errorf("toolbox on a stopped sandbox: %d %s", r.Status, r.Body)
	}
	// The socket.io channel is absent: the SDK falls back to polling.
	if r := mustDo(t, "GET", "/daytona/api/socket.io/?EIO=4&transport=websocket", nil); r.Status != 404 {
		t.Errorf("socket.io: %d", r.Status)
	}
}

// TestEphemeralStop: Daytona never shows an ephemeral sandbox stopped.
// Its stop answers destroyed once the delete is done, so a read right
// after it is 404 (the SDK's stop then returns without polling), and the
// sandbox no longer counts against the org.
func TestEphemeralStop(t *testing.T) {
	need(t)
	r := mustDo(t, "POST", "/daytona/api/sandbox", map[string]any{"snapshot": "busybox", "autoDeleteInterval": 0})
	if r.Status != 200 || r.JSON()["state"] != "started" || r.JSON()["autoDeleteInterval"] != float64(0) {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := r.JSON()["id"].(string)
	t.Cleanup(func() { do("DELETE", "/daytona/api/sandbox/"+id, nil) })
	if r := mustDo(t, "POST", "/daytona/api/sandbox/"+id+"/stop", nil); r.Status != 200 || r.JSON()["state"] != "destroyed" || r.JSON()["desiredState"] != "destroyed" {
		t.Fatalf("stop of an ephemeral sandbox: %d %s, want state destroyed", r.Status, r.Body)
	}
	wantError(t, mustDo(t, "GET", "/daytona/api/sandbox/"+id, nil), 404)
	wantError(t, mustDo(t, "POST", "/daytona/api/sandbox/"+id+"/start", nil), 404)
	if r := mustDo(t, "GET", "/v1/sandboxes/"+id+"?include_deleted=true", nil); r.Status != 200 || r.JSON()["state"] != "deleted" {
		t.Errorf("the sandbox after its stop answered: %d %s, want deleted", r.Status, r.Body)
	}
}

// TestSDK runs the real Daytona SDK's test scripts (*.test.mjs) with
// node, once per npm name of the SDK. It gives them what they cannot make
// themselves: a network namespace with two addresses serving "hi" on TCP
// port 9000 (egress allow and block targets; PT_OUTSIDE_ADDRS), an org
// per run whose quota is one sandbox (PT_LIMITED_KEY: its second create
// is 429),
// and ptd's data dir (PT_DATA_DIR: the error-state test breaks a stopped
// sandbox's disk image there).
func TestSDK(t *testing.T) {
	need(t)
	node := testenv.RequiresNode(t, ".")
	out := ptdtest.NewOutside(t, "dyt", 2)
	out.Serve(t, "0.0.0.0:9000", func(c net.Conn) { fmt.Fprintln(c, "hi") })
	addrs := make([]string, len(out.Addrs))
	for i, a := range out.Addrs {
		addrs[i] = a.String()
	}
	files, _ := filepath.Glob("*.test.mjs")
	// One package after the other: run at once, they doubled the load on
	// a shared machine and its creates outlasted the SDK's 60 s wait.
	// Their names and labels are unique per run all the same (uniq).
	for _, pkg := range []string{"@daytonaio/sdk", "@daytona/sdk"} {
		t.Run(pkg, func(t *testing.T) {
			testenv.RequiresNode(t, ".", pkg)
			limited := limitedOrg(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, append([]string{"--test", "--test-force-exit", "--test-timeout=600000", "--test-concurrency=1", "--test-reporter=spec"}, files...)...)
			cmd.Env = append(os.Environ(), "DAYTONA_SDK_PACKAGE="+pkg,
				"DAYTONA_API_URL="+env.url+"/daytona/api", "DAYTONA_API_KEY="+env.token,
				"PT_API_URL="+env.url, "PT_PREVIEW_URL="+env.previewURL, "PT_DATA_DIR="+env.dataDir,
				"PT_OUTSIDE_ADDRS="+strings.Join(addrs, ","), "PT_LIMITED_KEY="+limited)
			b, err := cmd.CombinedOutput()
			t.Logf("node --test output (%s):\n%s", pkg, b)
			if err != nil {
				t.Fatalf("node --test with %s: %v", pkg, err)
			}
		})
	}
}

// limitedOrg makes an org whose quota is one sandbox and returns its
// token.
func limitedOrg(t *testing.T) string {
	t.Helper()
	org := mustDo(t, "POST", "/v1/orgs", map[string]any{"name": "daytona-limited-" + ptdtest.RandHex(4)})
	token, _ := org.JSON()["token"].(string)
	o, _ := org.JSON()["org"].(map[string]any)
	orgID, _ := o["id"].(string)
	if token == "" || orgID == "" {
		t.Fatalf("new org: %d %s", org.Status, org.Body)
	}
	if r := mustDo(t, "PUT", "/v1/orgs/"+orgID+"/quotas", map[string]any{"max_sandboxes": 1}); r.Status != 200 {
		t.Fatalf("quota: %d %s", r.Status, r.Body)
	}
	return token
}

// TestPythonSDK runs the real `daytona` Python SDK (pinned in
// requirements.txt, installed into .venv by scripts/test.sh) through the
// main cases.
func TestPythonSDK(t *testing.T) {
	need(t)
	py := testenv.RequiresVenv(t, ".")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "-v", "test_python_sdk.py")
	cmd.Env = append(os.Environ(), "DAYTONA_API_URL="+env.url+"/daytona/api", "DAYTONA_API_KEY="+env.token)
	out, err := cmd.CombinedOutput()
	t.Logf("python output:\n%s", out)
	if err != nil {
		t.Fatalf("python SDK: %v", err)
	}
}
