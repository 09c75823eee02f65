package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// TestDefaultRuntimeIsGVisor: a ptd started without --default-runtime (the
// harness pins runc; an empty flag undoes that) runs sandboxes that do not
// name a runtime under gvisor, because runsc runs sandboxes on these hosts.
func TestDefaultRuntimeIsGVisor(t *testing.T) {
	requireEnv(t)
	d, err := ptdtest.Start(ptdtest.Options{ExtraArgs: []string{"--default-runtime=", "--pids-limit", "256"}})
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("second ptd: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("second ptd: %v", err)
	}
	if !strings.Contains(d.Log(), "default runtime class is gvisor") {
		t.Errorf("ptd did not log its default runtime choice:\n%s", d.Log())
	}
	body, _ := json.Marshal(map[string]any{"template": "busybox"})
	req, _ := http.NewRequest("POST", d.URL+"/v1/sandboxes?wait_for_state=running&wait_timeout_ms=300000", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	if resp.StatusCode != 201 || m["state"] != "running" || m["runtime"] != "gvisor" {
		t.Fatalf("create without a runtime: %d %v", resp.StatusCode, m)
	}
}
