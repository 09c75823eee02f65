package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/testenv"
)

// compatCall sends method target (body JSON, or none) to d with hdr and
// returns the status, headers and body.
func compatCall(t *testing.T, d *ptdtest.Daemon, method, target string, body any, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, d.URL+target, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// checkCompatRegions checks E2B's, Daytona's and MCP's surfaces through
// region a against sandboxes made in both regions: want is every sandbox
// in the native list's order (created_at, then id, descending), and bID,
// bEnvd and bKey three that live in region b; only bID has been asked for
// through a before (by /v1), so bEnvd and bKey are found by envd's and
// E2B's own credentials (the access token, the API key). E2B's and Daytona's calls are plain HTTP in
// their wire formats (the SDKs' own runs are tests/compat's, against one
// ptd); MCP's is the Go MCP SDK's client over Streamable HTTP.
func checkCompatRegions(t *testing.T, a, b *ptdtest.Daemon, want []string, bID, bEnvd, bKey string) {
	t.Helper()
	e2bKey := map[string]string{"X-API-Key": a.Token}
	// E2B's v2 list, walked two at a time with its nextToken, is every
	// sandbox of both regions in the native order: never restarted, each
	// started when it was made, and the order breaks ties by id too.
	var walked []string
	target := "/v2/sandboxes?limit=2"
	for range len(want) + 2 {
		code, hdr, body := compatCall(t, a, http.MethodGet, target, nil, e2bKey)
		var rows []struct {
			SandboxID string `json:"sandboxID"`
		}
		if err := json.Unmarshal(body, &rows); code != http.StatusOK || err != nil || len(rows) > 2 {
			t.Fatalf("E2B %s through a: %d %s", target, code, body)
		}
		for _, r := range rows {
			walked = append(walked, r.SandboxID)
		}
		next := hdr.Get("X-Next-Token")
		if next == "" {
			break
		}
		target = "/v2/sandboxes?limit=2&nextToken=" + next
	}
	if d := cmp.Diff(want, walked); d != "" {
		t.Errorf("E2B v2 pages through a (-want +got):\n%s", d)
	}
	// The deprecated unpaged list too.
	code, _, body := compatCall(t, a, http.MethodGet, "/sandboxes", nil, e2bKey)
	var v1 []struct {
		SandboxID string `json:"sandboxID"`
	}
	json.Unmarshal(body, &v1)
	var v1IDs []string
	for _, r := range v1 {
		v1IDs = append(v1IDs, r.SandboxID)
	}
	if d := cmp.Diff(want, v1IDs); code != http.StatusOK || d != "" {
		t.Errorf("E2B GET /sandboxes through a: %d (-want +got):\n%s", code, d)
	}
	// E2B's timeout and get of b's sandbox through a, with the API key
	// alone, reach b.
	if code, _, body := compatCall(t, a, http.MethodPost, "/sandboxes/"+bKey+"/timeout", map[string]int{"timeout": 900}, e2bKey); code != http.StatusNoContent {
		t.Fatalf("E2B timeout of b's %s through a: %d %s", bKey, code, body)
	}
	var viaA, viaB struct {
		SandboxID, EndAt string
	}
	if code, _, body := compatCall(t, a, http.MethodGet, "/sandboxes/"+bKey, nil, e2bKey); code != http.StatusOK || json.Unmarshal(body, &viaA) != nil {
		t.Fatalf("E2B get of b's %s through a: %d %s", bKey, code, body)
	}
	if code, _, body := compatCall(t, b, http.MethodGet, "/sandboxes/"+bKey, nil, e2bKey); code != http.StatusOK || json.Unmarshal(body, &viaB) != nil {
		t.Fatalf("E2B get of %s through its own region b: %d %s", bKey, code, body)
	}
	if end, err := time.Parse(time.RFC3339Nano, viaB.EndAt); viaA != viaB || err != nil || time.Until(end) < 10*time.Minute {
		t.Errorf("E2B get of %s: through a %+v, through b %+v, want the same, ending ~15 min from now", bKey, viaA, viaB)
	}

	// E2B's batch metrics through either region answer for the sandboxes
	// of both.
	metricsOf := func(d *ptdtest.Daemon) []string {
		t.Helper()
		code, _, body := compatCall(t, d, http.MethodGet, "/sandboxes/metrics?sandbox_ids="+strings.Join(want, ","), nil, e2bKey)
		var m struct{ Sandboxes map[string]json.RawMessage }
		if code != http.StatusOK || json.Unmarshal(body, &m) != nil {
			t.Fatalf("E2B batch metrics through %s: %d %s", d.URL, code, body)
		}
		return slices.Sorted(maps.Keys(m.Sandboxes))
	}
	if viaA, viaB := metricsOf(a), metricsOf(b); !slices.Contains(viaA, bKey) || !slices.Equal(viaA, viaB) {
		t.Errorf("E2B batch metrics: through a %v, through b %v, want the same, with b's %s", viaA, viaB, bKey)
	}

	// envd traffic through a for b's other sandbox, never asked for through
	// a before: its access token (from a connect through b) finds it; a
	// wrong one does not.
	var conn struct {
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	if code, _, body := compatCall(t, b, http.MethodPost, "/sandboxes/"+bEnvd+"/connect", map[string]int{"timeout": 600}, e2bKey); code/100 != 2 ||
		json.Unmarshal(body, &conn) != nil || conn.EnvdAccessToken == "" {
		t.Fatalf("E2B connect of %s through its own region b: %d %s", bEnvd, code, body)
	}
	envd := func(tok string) (int, []byte) {
		code, _, body := compatCall(t, a, http.MethodGet, "/files?path=/etc/hostname&username=root", nil,
			map[string]string{"E2b-Sandbox-Id": bEnvd, "X-Access-Token": tok})
		return code, body
	}
	if code, body := envd("wrong-" + conn.EnvdAccessToken); code == http.StatusOK {
		t.Errorf("envd read in b's %s through a with a wrong token: %d %s, want refused", bEnvd, code, body)
	}
	if code, body := envd(conn.EnvdAccessToken); code != http.StatusOK || len(bytes.TrimSpace(body)) == 0 {
		t.Errorf("envd read in b's %s through a with its token: %d %s", bEnvd, code, body)
	}

	// Daytona's list, walked two at a time with its cursor, holds every
	// sandbox once (its order, by createdAt at milliseconds, is the unit
	// tests'); its get of b's sandbox through a reaches b.
	bearer := map[string]string{"Authorization": "Bearer " + a.Token}
	var items []string
	cursor := "0"
	for range len(want) + 2 {
		code, _, body := compatCall(t, a, http.MethodGet, "/daytona/api/sandbox?limit=2&cursor="+cursor, nil, bearer)
		var page struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
			NextCursor *string `json:"nextCursor"`
		}
		if err := json.Unmarshal(body, &page); code != http.StatusOK || err != nil || len(page.Items) > 2 {
			t.Fatalf("Daytona list cursor %s through a: %d %s", cursor, code, body)
		}
		for _, it := range page.Items {
			items = append(items, it.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	if d := cmp.Diff(sorted(want), sorted(items)); d != "" || len(items) != len(want) {
		t.Errorf("Daytona list pages through a (-want +got, as sets):\n%s (%d items)", d, len(items))
	}
	var dt struct{ ID, State string }
	if code, _, body := compatCall(t, a, http.MethodGet, "/daytona/api/sandbox/"+bID, nil, bearer); code != http.StatusOK || json.Unmarshal(body, &dt) != nil || dt.ID != bID {
		t.Fatalf("Daytona get of b's %s through a: %d %s", bID, code, body)
	}

	// MCP through a: list_sandboxes is both regions' sandboxes, and exec in
	// b's sandbox runs there.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "regions-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: a.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{a.Token}}}, nil)
	if err != nil {
		t.Fatalf("MCP through a: %v", err)
	}
	defer cs.Close()
	call := func(name string, args map[string]any, out any) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("MCP %s %v through a: %v %+v", name, args, err, res)
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("MCP %s: %v (%s)", name, err, b)
		}
	}
	var list struct {
		Sandboxes []struct{ ID string }
		Total     int
	}
	call("list_sandboxes", map[string]any{"limit": 200}, &list)
	var mcpIDs []string
	for _, s := range list.Sandboxes {
		mcpIDs = append(mcpIDs, s.ID)
	}
	if d := cmp.Diff(want, mcpIDs); d != "" || list.Total != len(want) {
		t.Errorf("MCP list_sandboxes through a: total %d (-want +got):\n%s", list.Total, d)
	}
	var ex struct {
		ExitCode int `json:"exit_code"`
		Stdout   string
	}
	call("exec", map[string]any{"sandbox_id": bID, "command": "echo mcp-in-b"}, &ex)
	if ex.ExitCode != 0 || strings.TrimSpace(ex.Stdout) != "mcp-in-b" {
		t.Errorf("MCP exec in b's %s through a: %+v", bID, ex)
	}
}

// checkCompatRegionDown checks that E2B's and Daytona's lists through a,
// with region b down, are 503 region_unavailable naming b (never a list
// without b's sandboxes).
func checkCompatRegionDown(t *testing.T, a *ptdtest.Daemon) {
	t.Helper()
	for _, c := range []struct{ target, hdr, val string }{
		{"/v2/sandboxes", "X-API-Key", a.Token},
		{"/sandboxes", "X-API-Key", a.Token},
		{"/daytona/api/sandbox", "Authorization", "Bearer " + a.Token},
	} {
		code, hdr, body := compatCall(t, a, http.MethodGet, c.target, nil, map[string]string{c.hdr: c.val})
		var e struct{ Code, Region string }
		json.Unmarshal(body, &e)
		if code != http.StatusServiceUnavailable || e.Code != "region_unavailable" || e.Region != "rb" || hdr.Get("Retry-After") == "" {
			t.Errorf("%s through a with rb down: %d %s, want 503 region_unavailable naming rb", c.target, code, body)
		}
	}
}

// checkSDKRegions runs the real e2b and Daytona SDKs, npm's and PyPI's
// (tests/compat's, pinned there; scripts/test.sh installs them), through
// region a: each regions.mjs and regions.py there walks the SDK's list
// pages (want) and reaches b's sandbox bID — E2B's connects, reads a file
// and sets its timeout; Daytona's gets it, reads a file through its
// toolbox, and makes a sandbox in b with a client whose target is b.
// E2B's regions.mjs also walks the snapshot list's pages (snaps, newest
// first, of sandboxes in both regions; the last two are bID's).
func checkSDKRegions(t *testing.T, a *ptdtest.Daemon, want []string, bID string, snaps []string) {
	t.Helper()
	ids, _ := json.Marshal(want)
	snapIDs, _ := json.Marshal(snaps)
	for _, c := range []struct {
		name, dir, pkg string
		env            []string
	}{
		{"e2b SDK", "e2b", "e2b", []string{"E2B_API_URL=" + a.URL, "E2B_SANDBOX_URL=" + a.URL, "E2B_API_KEY=" + a.Token, "E2B_DEBUG="}},
		{"Daytona SDK", "daytona", "@daytonaio/sdk", []string{"DAYTONA_API_URL=" + a.URL + "/daytona/api", "DAYTONA_API_KEY=" + a.Token}},
	} {
		dir := filepath.Join("..", "compat", c.dir)
		run := func(t *testing.T, prog, script string) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, prog, script)
			cmd.Dir = dir
			cmd.Env = append(append(os.Environ(), c.env...), "REGIONS_WANT="+string(ids), "REGIONS_B_ID="+bID, "REGIONS_B=rb",
				"REGIONS_SNAPS="+string(snapIDs))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the %s (%s) through region a: %v\n%s", c.name, script, err, out)
			}
			t.Logf("%s", out)
		}
		// Subtests: without an SDK installed only its own is skipped.
		t.Run(c.name+" npm", func(t *testing.T) { run(t, testenv.RequiresNode(t, dir, c.pkg), "regions.mjs") })
		t.Run(c.name+" PyPI", func(t *testing.T) {
			py, _ := filepath.Abs(testenv.RequiresVenv(t, dir))
			run(t, py, "regions.py")
		})
	}
}

// bearerRT adds a bearer token to every request.
type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }
