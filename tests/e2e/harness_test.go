// Package e2e drives a real ptd (real runc, SQLite, disks, namespaces)
// through its public interfaces: the REST API, the pt CLI and the Go SDK.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// env is the one ptd every test of this package talks to.
var env struct {
	url, token, dataDir, binDir string
	bridge, subnet, cgroup      string
	skip                        string
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "e2e: must run as root in CI")
			return 1
		}
		env.skip = "e2e tests need root (they run real sandboxes)"
		return m.Run()
	}
	stop, err := startPtd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		if stop != nil {
			stop()
		}
		return 1
	}
	code := m.Run()
	stop()
	return code
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// startPtd builds the binaries and starts ptd on a free port with its own
// data dir, bridge, subnet and cgroup parent, so it collides with nothing.
func startPtd() (stop func(), err error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	env.binDir, err = os.MkdirTemp("", "pt-e2e-bin-")
	if err != nil {
		return nil, err
	}
	builds := [][]string{
		{"CGO_ENABLED=0", "pt-agent", "./cmd/pt-agent"},
		{"", "ptd", "./cmd/ptd"},
		{"", "pt", "./cmd/pt"},
	}
	for _, b := range builds {
		cmd := exec.Command("go", "build", "-o", filepath.Join(env.binDir, b[1]), b[2])
		cmd.Dir = root
		cmd.Env = os.Environ()
		if b[0] != "" {
			cmd.Env = append(cmd.Env, b[0])
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %v\n%s", b[1], err, out)
		}
	}
	env.dataDir, err = os.MkdirTemp("/var/tmp", "pt-e2e-data-")
	if err != nil {
		return nil, err
	}
	suffix := randHex(3)
	n, _ := rand.Int(rand.Reader, big.NewInt(200))
	env.bridge = "pte" + suffix
	env.subnet = fmt.Sprintf("100.%d.%d.0/24", 70+n.Int64()%50, n.Int64())
	env.cgroup = "/platinum-e2e-" + suffix
	env.token = "pt_e2e_" + randHex(16)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	env.url = "http://" + addr

	args := []string{"serve", "--listen", addr, "--data-dir", env.dataDir,
		"--bridge", env.bridge, "--subnet", env.subnet, "--cgroup-parent", env.cgroup,
		"--pids-limit", "256", "--log-level", "debug"}
	logf, err := os.Create(filepath.Join(env.binDir, "ptd.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(env.binDir, "ptd"), args...)
	cmd.Env = append(os.Environ(), "PT_TOKEN="+env.token)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
		reset := exec.Command(filepath.Join(env.binDir, "ptd"), "reset", "--data-dir", env.dataDir,
			"--bridge", env.bridge, "--subnet", env.subnet, "--cgroup-parent", env.cgroup)
		if out, err := reset.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: ptd reset: %v\n%s\n", err, out)
		}
		removeCgroupParent(env.cgroup)
		if os.Getenv("PT_E2E_KEEP") == "" {
			os.RemoveAll(env.dataDir)
			os.RemoveAll(env.binDir)
		} else {
			fmt.Fprintln(os.Stderr, "e2e: kept", env.dataDir, env.binDir)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(env.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return stop, nil
			}
		}
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(env.binDir, "ptd.log"))
	return stop, fmt.Errorf("ptd did not become healthy:\n%s", log)
}

// removeCgroupParent removes the (now empty) parent cgroup in every
// hierarchy, v1 or v2.
func removeCgroupParent(parent string) {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + parent)
	dirs = append(dirs, "/sys/fs/cgroup"+parent)
	for _, d := range dirs {
		os.Remove(d)
	}
}

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

type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map.
func (r response) JSON() map[string]any {
	var m map[string]any
	json.Unmarshal(r.Body, &m)
	return m
}

func (c *client) do(method, path string, body any) response {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	case io.Reader:
		rd = b
	default:
		js, _ := json.Marshal(b)
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, env.url+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// create makes a running sandbox and deletes it when the test ends.
func (c *client) create(body map[string]any) string {
	c.t.Helper()
	r := c.do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=300000", body)
	if r.Status != 201 {
		c.t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	m := r.JSON()
	if m["state"] != "running" {
		c.t.Fatalf("create: state %v, want running: %s", m["state"], r.Body)
	}
	id := m["id"].(string)
	c.t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
	return id
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
	r := c.do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": script, "timeout_ms": 120000})
	if r.Status != 200 {
		c.t.Fatalf("exec %q: %d %s", script, r.Status, r.Body)
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
