package host

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/hostapi"
)

// TestAgentInitEnv: a start's init reaches pt-agent as PT_AGENT_INIT, the
// JSON pt-agent reads (POST /init's field names); none, or one too big for
// an environment variable, is left to the call after boot.
func TestAgentInitEnv(t *testing.T) {
	if _, ok := agentInitEnv(nil); ok {
		t.Error("no init: an init variable")
	}
	in := &hostapi.AgentInit{Env: map[string]string{"A": "1"}, Workdir: "/w", Files: map[string]string{"/etc/pt-env": "export A='1'\n"}}
	v, ok := agentInitEnv(in)
	name, val, _ := strings.Cut(v, "=")
	if !ok || name != "PT_AGENT_INIT" {
		t.Fatalf("init variable %q, %v", v, ok)
	}
	var got struct {
		EnvVars        map[string]string `json:"envVars"`
		DefaultWorkdir string            `json:"defaultWorkdir"`
		Files          map[string]string `json:"files"`
	}
	if err := json.Unmarshal([]byte(val), &got); err != nil || got.EnvVars["A"] != "1" || got.DefaultWorkdir != "/w" || got.Files["/etc/pt-env"] != "export A='1'\n" {
		t.Errorf("init variable %s: %+v %v", val, got, err)
	}
	big := &hostapi.AgentInit{Env: map[string]string{"A": strings.Repeat("x", agentInitMax)}}
	if _, ok := agentInitEnv(big); ok {
		t.Error("an init over agentInitMax went into the environment")
	}
}
