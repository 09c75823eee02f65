package e2e

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// metricValue reads one series' value from Prometheus text ("" when the
// series is absent).
func metricValue(text, series string) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return v
		}
	}
	return ""
}

func scrapeMetrics(t *testing.T, url, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s/metrics: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// TestMetricsLifecycle: a create that reaches running bumps the lifecycle
// histogram under its runtime class and outcome, the sandbox shows in the
// by-state gauge, and the request is counted by its route template. The
// --metrics-listen listener serves the same families without a token.
func TestMetricsLifecycle(t *testing.T) {
	c := newClient(t)
	series := `platinum_lifecycle_operation_duration_seconds_count{op="create",outcome="ok",runtime="runc"}`
	count := func(text string) int {
		n, _ := strconv.Atoi(metricValue(text, series))
		return n
	}
	before := count(scrapeMetrics(t, env.url, env.token))
	id := c.create(map[string]any{"template": "busybox"})
	text := scrapeMetrics(t, env.url, env.token)
	if got := count(text); got < before+1 {
		t.Errorf("%s = %d after a create, was %d", series, got, before)
	}
	if v := metricValue(text, `platinum_sandboxes{state="running"}`); v == "" || v == "0" {
		t.Errorf("sandboxes running = %q with %s running", v, id)
	}
	if metricValue(text, `platinum_http_requests_total{code="201",method="POST",route="POST /v1/sandboxes"}`) == "" {
		t.Error("the create is not counted under its route template")
	}
	open := scrapeMetrics(t, env.metricsURL, "")
	if count(open) < before+1 {
		t.Errorf("--metrics-listen: %s = %d", series, count(open))
	}
	// The API listener's /metrics is for platform admins only.
	r := (&client{t: t}).do("GET", "/metrics", nil)
	if r.Status != 401 || r.Header.Get("X-Request-Id") == "" || !strings.Contains(string(r.Body), `"request_id"`) {
		t.Errorf("/metrics without a token: %d %v %s", r.Status, r.Header, r.Body)
	}
}

// TestRequestIDInPtdLog: a request's id (the client's own) is on ptd's
// access line for it, with the route template and status, so a user who
// quotes the id from an error finds the request in the log.
func TestRequestIDInPtdLog(t *testing.T) {
	newClient(t)
	id := "e2e-" + randHex(8)
	req, _ := http.NewRequest("GET", env.url+"/v1/sandboxes/sbx_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil)
	req.Header.Set("Authorization", "Bearer "+env.token)
	req.Header.Set("X-Request-Id", id)
	if st := statusOf(t, req); st != 404 {
		t.Fatalf("get of a missing sandbox: %d", st)
	}
	for i := 0; ; i++ {
		b, _ := os.ReadFile(filepath.Join(env.binDir, "ptd.log"))
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "request_id="+id) && strings.Contains(line, `route="GET /v1/sandboxes/{id}"`) && strings.Contains(line, "status=404") {
				return
			}
		}
		if i == 20 {
			t.Fatalf("ptd's log has no access line with request_id=%s", id)
		}
		sleep(100)
	}
}
