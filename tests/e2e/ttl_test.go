package e2e

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// sandboxJSON is the part of a sandbox record these tests read.
type sandboxJSON struct {
	ID                string  `json:"id"`
	State             string  `json:"state"`
	Status            string  `json:"status"`
	TTLMs             *int64  `json:"ttl_ms"`
	ExpiresAt         *string `json:"expires_at"`
	CreatedAt         string  `json:"created_at"`
	DestroyedAt       *string `json:"destroyed_at"`
	DestroyedReason   string  `json:"destroyed_reason"`
	AutoStopMinutes   int     `json:"auto_stop_minutes"`
	Template          string  `json:"template"`
	TemplateSlug      string  `json:"template_slug"`
	TemplateVersionID *string `json:"template_version_id"`
	TemplateVersion   *int    `json:"template_version"`
}

func decodeSandbox(t *testing.T, r response) sandboxJSON {
	t.Helper()
	var sb sandboxJSON
	if err := json.Unmarshal(r.Body, &sb); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
	return sb
}

func parseTime(t *testing.T, s *string) time.Time {
	t.Helper()
	if s == nil {
		t.Fatal("timestamp is null")
	}
	tm, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		t.Fatalf("timestamp %q is not ISO 8601: %v", *s, err)
	}
	return tm
}

// TestTTLCreateValidation: ttl_ms is a positive integer capped at one hour
// at creation; bad values change nothing.
func TestTTLCreateValidation(t *testing.T) {
	c := newClient(t)
	for _, tc := range []struct {
		body, code string
	}{
		{`{"template":"busybox","ttl_ms":0}`, "invalid_request"},
		{`{"template":"busybox","ttl_ms":-1}`, "invalid_request"},
		{`{"template":"busybox","ttl_ms":1.5}`, "invalid_request"},
		{`{"template":"busybox","ttl_ms":"600000"}`, "invalid_request"},
		{`{"template":"busybox","ttl_ms":3600001}`, "sandbox_ttl_exceeded"},
		{`{"template":"busybox","ttl_ms":86400000}`, "sandbox_ttl_exceeded"},
	} {
		r := c.do("POST", "/v1/sandboxes", tc.body)
		if r.Status != 400 || r.JSON()["code"] != tc.code {
			t.Errorf("%s: %d %s, want 400 %s", tc.body, r.Status, r.Body, tc.code)
		}
	}
}

// TestTTLLifecycle: a sandbox with ttl_ms has expires_at (ISO 8601) and a
// status; setTtl resets the countdown from the request up to 24 hours since
// creation; kill is idempotent; lists leave destroyed sandboxes out.
func TestTTLLifecycle(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "busybox")
	id := c.create(map[string]any{"template": "busybox", "ttl_ms": 10 * 60 * 1000, "metadata": map[string]string{"run": "nightly-eval"}})
	sb := decodeSandbox(t, c.do("GET", "/v1/sandboxes/"+id, nil))
	if sb.TTLMs == nil || *sb.TTLMs != 600000 || sb.Status != "ready" || sb.State != "running" {
		t.Fatalf("after create: %+v, want ttl_ms 600000, status ready, state running", sb)
	}
	created := parseTime(t, &sb.CreatedAt)
	if got := parseTime(t, sb.ExpiresAt).Sub(created); got != 10*time.Minute {
		t.Errorf("expires_at - created_at = %v, want 10m", got)
	}

	before := time.Now()
	r := c.do("POST", "/v1/sandboxes/"+id+"/ttl", map[string]any{"ttl_ms": 60 * 60 * 1000})
	if r.Status != 200 {
		t.Fatalf("setTtl: %d %s", r.Status, r.Body)
	}
	sb = decodeSandbox(t, r)
	exp := parseTime(t, sb.ExpiresAt)
	if exp.Before(before.Add(time.Hour-time.Second)) || exp.After(time.Now().Add(time.Hour+time.Second)) || *sb.TTLMs != 3600000 {
		t.Errorf("setTtl 1h: expires_at %v (ttl_ms %d), want an hour after the request", exp, *sb.TTLMs)
	}
	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"ttl_ms":86400000}`, 400, "sandbox_ttl_exceeded"},
		{`{"ttl_ms":0}`, 400, "invalid_request"},
		{`{}`, 400, "invalid_request"},
		{`{"ttl_ms":1000,"ttlMs":2000}`, 400, "invalid_request"}, // the camelCase name is accepted, but not two different values
	} {
		r := c.do("POST", "/v1/sandboxes/"+id+"/ttl", tc.body)
		if r.Status != tc.status || r.JSON()["code"] != tc.code {
			t.Errorf("setTtl %s: %d %s, want %d %s", tc.body, r.Status, r.Body, tc.status, tc.code)
		}
	}
	if got := decodeSandbox(t, c.do("GET", "/v1/sandboxes/"+id, nil)); *got.ExpiresAt != *sb.ExpiresAt {
		t.Errorf("refused setTtl changed expires_at: %s, want %s", *got.ExpiresAt, *sb.ExpiresAt)
	}
	// 24 hours since creation is the limit, not 24 hours from now.
	left := created.Add(24 * time.Hour).Sub(time.Now())
	if r := c.do("POST", "/v1/sandboxes/"+id+"/ttl", map[string]any{"ttl_ms": (left - time.Minute).Milliseconds()}); r.Status != 200 {
		t.Errorf("setTtl to just under 24h since creation: %d %s", r.Status, r.Body)
	}

	// Kill, twice: both answer the destroyed record.
	for i := range 2 {
		r := c.do("POST", "/v1/sandboxes/"+id+"/kill", nil)
		k := decodeSandbox(t, r)
		if r.Status != 200 || k.Status != "destroyed" || k.DestroyedReason != "user_killed" || k.DestroyedAt == nil {
			t.Errorf("kill %d: %d %s", i, r.Status, r.Body)
		}
	}
	r = c.do("POST", "/v1/sandboxes/"+id+"/ttl", map[string]any{"ttl_ms": 1000})
	if r.Status != 409 || r.JSON()["code"] != "sandbox_destroyed" {
		t.Errorf("setTtl on a killed sandbox: %d %s, want 409 sandbox_destroyed", r.Status, r.Body)
	}
	waitTTLState(t, c, id, "deleted")
	if r := c.do("POST", "/v1/sandboxes/"+id+"/kill", nil); r.Status != 200 || decodeSandbox(t, r).State != "deleted" {
		t.Errorf("kill after deletion: %d %s, want 200 with the deleted record", r.Status, r.Body)
	}
	if listed(t, c, "/v1/sandboxes?metadata[run]=nightly-eval", id) {
		t.Error("the default list shows a destroyed sandbox")
	}
	if !listed(t, c, "/v1/sandboxes?metadata[run]=nightly-eval&include=destroyed,failed", id) {
		t.Error("include=destroyed does not list the destroyed sandbox")
	}
}

// TestTTLExpiry: in its last minute a sandbox shows expiring; at expiry it
// is destroyed with destroyed_reason ttl_expired.
func TestTTLExpiry(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "busybox")
	id := c.create(map[string]any{"template": "busybox", "ttl_ms": 5 * 60 * 1000})
	if sb := decodeSandbox(t, c.do("GET", "/v1/sandboxes/"+id, nil)); sb.Status != "ready" {
		t.Errorf("five minutes left: status %s, want ready", sb.Status)
	}
	r := c.do("POST", "/v1/sandboxes/"+id+"/ttl", map[string]any{"ttl_ms": 3000})
	if sb := decodeSandbox(t, r); r.Status != 200 || sb.Status != "expiring" {
		t.Errorf("three seconds left: %d status %s, want expiring", r.Status, sb.Status)
	}
	sb := waitTTLState(t, c, id, "deleted")
	if sb.Status != "destroyed" || sb.DestroyedReason != "ttl_expired" {
		t.Errorf("after expiry: status %s reason %q, want destroyed ttl_expired", sb.Status, sb.DestroyedReason)
	}
}

// TestTTLDefaults: creates from pt-base and busybox keep their retention
// and no TTL; a create that names neither template nor ttl is refused only
// if the default template is unknown (it is python-node here, tested in
// templates_test.go).
func TestTTLDefaults(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "busybox")
	id := c.create(map[string]any{"template": "busybox"})
	sb := decodeSandbox(t, c.do("GET", "/v1/sandboxes/"+id, nil))
	if sb.ExpiresAt != nil || sb.TTLMs != nil || sb.AutoStopMinutes != 60 {
		t.Errorf("pt-base create: expires_at %v ttl_ms %v auto_stop %d, want no TTL and 60-minute auto-stop", sb.ExpiresAt, sb.TTLMs, sb.AutoStopMinutes)
	}
}

// TestStatusRunningWhileCommand: status is running while a command runs
// and ready once it is done.
func TestStatusRunningWhileCommand(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "busybox")
	id := c.create(map[string]any{"template": "busybox", "ttl_ms": 600000})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.sh(id, "sleep 4")
	}()
	deadline := time.Now().Add(4 * time.Second)
	seen := false
	for time.Now().Before(deadline) && !seen {
		seen = decodeSandbox(t, c.do("GET", "/v1/sandboxes/"+id, nil)).Status == "running"
		sleep(100)
	}
	wg.Wait()
	if !seen {
		t.Error("status never showed running while a command was in flight")
	}
	if st := decodeSandbox(t, c.do("GET", "/v1/sandboxes/"+id, nil)).Status; st != "ready" {
		t.Errorf("status after the command: %s, want ready", st)
	}
}

func waitTTLState(t *testing.T, c *client, id, state string) sandboxJSON {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r := c.do("GET", "/v1/sandboxes/"+id+"?include_deleted=true", nil)
		sb := decodeSandbox(t, r)
		if sb.State == state {
			return sb
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s never reached %s: %s", id, state, r.Body)
		}
		sleep(250)
	}
}

func listed(t *testing.T, c *client, path, id string) bool {
	t.Helper()
	r := c.do("GET", path, nil)
	if r.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	return strings.Contains(string(r.Body), id)
}
