package agent_test

import (
	"encoding/json"
	"net/http"
	"runtime"
	"testing"

	"github.com/platinum-dev/platinum/api/gen/process"
)

// TestSizeAndEnvReplace: GET /size answers the process's own CPU count and
// MemTotal (token required); and an environment handed over again by the
// control plane (an env patch) reaches every process started after it,
// removals included.
func TestSizeAndEnvReplace(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	type guestSize struct {
		CPUsOnline int    `json:"cpus_online"`
		MemTotalMB uint64 `json:"mem_total_mb"`
	}
	get := func(token string) (int, guestSize) {
		req, _ := http.NewRequest(http.MethodGet, e.ts.URL+"/size", nil)
		if token != "" {
			req.Header.Set("X-Access-Token", token)
		}
		status, b := e.do(t, req)
		var g guestSize
		json.Unmarshal(b, &g)
		return status, g
	}
	if status, _ := get(""); status != http.StatusUnauthorized {
		t.Errorf("size without a token: %d", status)
	}
	status, g := get(testToken)
	if status != 200 || g.CPUsOnline < 1 || g.CPUsOnline > runtime.NumCPU() || g.MemTotalMB == 0 {
		t.Errorf("size: %d %+v", status, g)
	}
	for i, tc := range []struct{ init, want string }{
		{`{"envVars":{"API_TOKEN":"old","OLD_UNUSED":"x"}}`, "old|x\n"},
		{`{"envVars":{"API_TOKEN":"new"}}`, "new|unset\n"},
	} {
		if status, _ := e.rawJSON(t, "/init", tc.init, map[string]string{"X-Access-Token": testToken}); status != 204 {
			t.Fatalf("init %d: %d", i, status)
		}
		ev, err := e.startAndCollect(ctx, t, &process.StartRequest{Process: shell(`echo "$API_TOKEN|${OLD_UNUSED-unset}"`), Stdin: new(false)})
		if err != nil {
			t.Fatal(err)
		}
		if ev.stdout.String() != tc.want {
			t.Errorf("after init %d: %q, want %q", i, ev.stdout.String(), tc.want)
		}
	}
}
