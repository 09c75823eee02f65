// Package e2e drives a real ptd (real runc, SQLite, disks, namespaces)
// through its public interfaces: the REST API, the pt CLI and the Go SDK.
// PT_TEST_STORE=postgres runs it on a PostgreSQL store instead.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/apicontract"
	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// env is the one ptd every test of this package talks to.
var env struct {
	url, token, dataDir, binDir string
	previewURL, metricsURL      string
	bridge, subnet, cgroup      string
	sshAddr                     string
	skip                        string
	// storeURL is ptd's PostgreSQL store (PT_TEST_STORE=postgres); empty
	// when it runs on SQLite in dataDir.
	storeURL string
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	env.skip = "e2e tests need root (they run real sandboxes)"
	defer egressCleanup()
	// Every call to ptd's API is held to api/openapi.yaml (apicontract).
	apicontract.Install()
	code := ptdtest.Main(m, "e2e", ptdtest.Options{ExtraArgs: append([]string{"--pids-limit", "256", "--log-level", "debug",
		"--webhook-allow-private", "--webhook-retry-base", "200ms", "--idle-after", e2eIdleAfter.String(),
		"--image-registry-allow-private", "--template-context-max-bytes", strconv.Itoa(e2eContextMaxBytes)}, egressArgs()...)},
		func(d *ptdtest.Daemon) error {
			env.url, env.token, env.dataDir, env.binDir, env.skip = d.URL, d.Token, d.DataDir, d.BinDir, ""
			env.previewURL, env.metricsURL = d.PreviewURL, d.MetricsURL
			env.bridge, env.subnet, env.cgroup = d.Bridge, d.Subnet, d.Cgroup
			env.sshAddr = d.SSHAddr
			env.storeURL = d.StoreURL
			apicontract.Register(d.URL)
			return nil
		})
	if v := apicontract.Violations(); len(v) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: %d calls broke api/openapi.yaml:\n  %s\n", len(v), strings.Join(v, "\n  "))
		if code == 0 {
			code = 1
		}
	}
	return code
}

func randHex(n int) string { return ptdtest.RandHex(n) }

func requireEnv(t *testing.T) {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
}

// client is a tiny raw-HTTP client for the REST API.
type client struct {
	t     *testing.T
	token string
}

func newClient(t *testing.T) *client {
	requireEnv(t)
	return &client{t: t, token: env.token}
}

type response = ptdtest.Response

func (c *client) do(method, path string, body any) response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, env.url+path, ptdtest.Body(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	r, err := ptdtest.Send(nil, req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// create makes a running sandbox and deletes it when the test ends.
func (c *client) create(body map[string]any) string {
	c.t.Helper()
	return c.createRecord(body)["id"].(string)
}

// createRecord is create returning the create's answer.
func (c *client) createRecord(body map[string]any) map[string]any {
	c.t.Helper()
	r := c.do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=300000", body)
	if r.Status != 201 {
		c.t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	m := r.JSON()
	if m["state"] != "running" {
		c.t.Fatalf("create: state %v, want running: %s", m["state"], r.Body)
	}
	c.t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+m["id"].(string), nil) })
	return m
}

// createOrg has c (the admin) create an organization named name, and
// returns its ID and a client with its token.
func createOrg(t *testing.T, c *client, name string) (string, *client) {
	t.Helper()
	r := c.do("POST", "/v1/orgs", map[string]any{"name": name})
	if r.Status != 201 {
		t.Fatalf("create org: %d %s", r.Status, r.Body)
	}
	m := r.JSON()
	return m["org"].(map[string]any)["id"].(string), &client{t: t, token: m["token"].(string)}
}

// listOf GETs a list route at path and returns its rows decoded as T,
// failing the test unless it answers 200; what names it in failures.
func listOf[T any](t *testing.T, c *client, what, path string) []T {
	t.Helper()
	r := c.do("GET", path, nil)
	if r.Status != 200 {
		t.Fatalf("%s: %d %s", what, r.Status, r.Body)
	}
	var out struct {
		Rows []T `json:"rows"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Rows
}

type execResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	TimedOut bool   `json:"timed_out"`
}

// sh runs a shell command in the sandbox and returns its result.
func (c *client) sh(id, script string) execResult {
	c.t.Helper()
	return c.shAt("exec", "/v1/sandboxes/"+id+"/exec", script, 120000)
}

// shAt posts script to the exec route at path with a timeout of
// timeoutMS and returns its result; what names the call in failures.
func (c *client) shAt(what, path, script string, timeoutMS int) execResult {
	c.t.Helper()
	r := c.do("POST", path, map[string]any{"cmd": script, "timeout_ms": timeoutMS})
	if r.Status != 200 {
		c.t.Fatalf("%s %q: %d %s", what, script, r.Status, r.Body)
	}
	var res execResult
	if err := json.Unmarshal(r.Body, &res); err != nil {
		c.t.Fatal(err)
	}
	return res
}

// mustSh runs script and fails the test unless it exits 0.
func (c *client) mustSh(id, script string) string {
	c.t.Helper()
	res := c.sh(id, script)
	if res.ExitCode != 0 {
		c.t.Fatalf("%q: exit %d\nstdout: %s\nstderr: %s", script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return res.Stdout
}
