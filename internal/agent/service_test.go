package agent_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/agent"
	"github.com/platinum-dev/platinum/internal/agent/agenttest"
)

// TestEnvFileFollowsInit: with Config.EnvFile set, every /init that sets
// the environment rewrites the file (0600, the whole environment), which
// is how the code interpreter sees an env patch at its next cell.
func TestEnvFileFollowsInit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "env.json")
	cfg := agent.DefaultConfig()
	cfg.Token, cfg.EnvFile = testToken, path
	_, ts := agenttest.Serve(t, cfg)
	for _, tc := range []struct {
		body string
		want map[string]string
	}{
		{`{"envVars":{"A":"1","B":"2"}}`, map[string]string{"A": "1", "B": "2"}},
		{`{"envVars":{"C":"3"}}`, map[string]string{"C": "3"}},
		{`{"defaultWorkdir":"/tmp"}`, map[string]string{"C": "3"}}, // no envVars: unchanged
	} {
		postInit(t, ts.URL, tc.body)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]string
		if err := json.Unmarshal(b, &got); err != nil || len(got) != len(tc.want) {
			t.Fatalf("after %s: %s", tc.body, b)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("after %s: %s = %q, want %q", tc.body, k, got[k], v)
			}
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
			t.Errorf("env file mode %v, want 0600", st.Mode().Perm())
		}
	}
}

// TestStartServiceReportsExit: a service started through the agent's
// spawner reports its exit on the channel.
func TestStartServiceReportsExit(t *testing.T) {
	cfg := agent.DefaultConfig()
	cfg.Token = testToken
	srv, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pid, exited, err := srv.StartService(exec.Command("sh", "-c", "exit 3"))
	if err != nil || pid <= 0 {
		t.Fatalf("start: %d %v", pid, err)
	}
	select {
	case err := <-exited:
		if err == nil || err.Error() != "exit status 3" {
			t.Errorf("exit = %v, want exit status 3", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit reported")
	}
}

// TestEnvScriptOnInit: an /init that asks writes the environment to
// Config.EnvScript as export lines a shell reads back exactly, and says
// so; one that does not ask leaves the file alone.
func TestEnvScriptOnInit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pt-env")
	cfg := agent.DefaultConfig()
	cfg.Token, cfg.EnvScript = testToken, path
	_, ts := agenttest.Serve(t, cfg)
	for _, tc := range []struct {
		body, wantHeader, wantA string
	}{
		{`{"envVars":{"A":"it's $HOME \"q\""},"envScript":true}`, "written", `it's $HOME "q"`},
		{`{"envVars":{"A":"later"}}`, "", `it's $HOME "q"`}, // not asked: the file keeps the boot values
		{`{"envVars":{"A":"new"},"envScript":true}`, "written", "new"},
	} {
		resp := postInit(t, ts.URL, tc.body)
		if h := resp.Header.Get("X-Pt-Env-Script"); h != tc.wantHeader {
			t.Errorf("%s: X-Pt-Env-Script %q, want %q", tc.body, h, tc.wantHeader)
		}
		out, err := exec.Command("sh", "-c", `. "$0"; printf %s "$A"`, path).CombinedOutput()
		if err != nil || string(out) != tc.wantA {
			t.Errorf("after %s: the shell read A=%q (%v), want %q", tc.body, out, err, tc.wantA)
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
			t.Errorf("env script mode %v, want 0644", st.Mode().Perm())
		}
	}
}

// postInit sends POST /init with body and wants 204.
func postInit(t *testing.T, url, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/init", strings.NewReader(body))
	req.Header.Set("X-Access-Token", testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("init %s: %v %v", body, resp, err)
	}
	resp.Body.Close()
	return resp
}
