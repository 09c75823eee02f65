package httpapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// TestLastStartIsNotUserMetadata: the platform's metadata.last_start is
// shown next to the user's keys but is not one of them. A sandbox with the
// full 16 user keys reads and patches fine after a stop and a start (its
// answer has the 16 and last_start); a metadata filter on last_start does
// not match the platform's value; and a create that sets last_start itself
// is 400 invalid_request (field metadata) and makes nothing.
func TestLastStartIsNotUserMetadata(t *testing.T) {
	srv, h, tok := newServer(t)
	close(h.release)
	md := map[string]string{}
	for i := range 16 {
		md[fmt.Sprintf("k%02d", i)] = fmt.Sprintf("v%d", i)
	}
	body, _ := json.Marshal(map[string]any{"template": "busybox", "metadata": md})
	resp, m := call(t, srv, tok, "POST", "/v1/sandboxes?wait_for_state=running", string(body))
	if resp.StatusCode != 201 {
		t.Fatalf("create with 16 keys: %d %v", resp.StatusCode, m)
	}
	id := m["id"].(string)
	for _, p := range []string{"/stop?wait_for_state=stopped", "/start?wait_for_state=running"} {
		if resp, m := call(t, srv, tok, "POST", "/v1/sandboxes/"+id+p, ""); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", p, resp.StatusCode, m)
		}
	}
	userKeys := func(what string, m map[string]any) string {
		t.Helper()
		got, _ := m["metadata"].(map[string]any)
		ls, _ := got["last_start"].(string)
		if len(got) != 17 || !strings.Contains(ls, `"restore":"disk_only"`) {
			t.Errorf("%s: metadata %v, want the 16 user keys and last_start", what, got)
		}
		for k, v := range md {
			if got[k] != v {
				t.Errorf("%s: metadata[%s] = %v, want %s", what, k, got[k], v)
			}
		}
		return ls
	}
	_, m = call(t, srv, tok, "GET", "/v1/sandboxes/"+id, "")
	ls := userKeys("read after start", m)
	resp, m = call(t, srv, tok, "PATCH", "/v1/sandboxes/"+id, `{"name":"full-metadata"}`)
	if resp.StatusCode != 200 || m["name"] != "full-metadata" {
		t.Fatalf("patch: %d %v", resp.StatusCode, m)
	}
	userKeys("patch answer", m)

	count := func(q string) int {
		t.Helper()
		resp, m := call(t, srv, tok, "GET", "/v1/sandboxes?"+q, "")
		rows, _ := m["rows"].([]any)
		if resp.StatusCode != 200 {
			t.Fatalf("list %s: %d %v", q, resp.StatusCode, m)
		}
		return len(rows)
	}
	if n := count("metadata[k03]=v3"); n != 1 {
		t.Errorf("filter on a user key: %d rows", n)
	}
	if n := count("metadata[last_start]=" + url.QueryEscape(ls)); n != 0 {
		t.Errorf("a metadata filter on last_start matched the platform's value: %d rows", n)
	}

	resp, m = call(t, srv, tok, "POST", "/v1/sandboxes", `{"template":"busybox","metadata":{"last_start":"mine"}}`)
	if resp.StatusCode != 400 || m["code"] != "invalid_request" || m["field"] != "metadata" || !strings.Contains(m["error"].(string), "last_start") {
		t.Errorf("create setting last_start: %d %v", resp.StatusCode, m)
	}
	if n := count(""); n != 1 {
		t.Errorf("a refused create made a sandbox: %d rows", n)
	}
}

// TestPlatformMetadataKeys: the keys warm pools and sessions find their
// sandboxes by (pt_pool, pt_pool_ready, pt_session_id) cannot be set at
// create: 400 invalid_request, field metadata, and nothing is made.
func TestPlatformMetadataKeys(t *testing.T) {
	srv, h, tok := newServer(t)
	close(h.release)
	for _, k := range []string{"pt_pool", "pt_pool_ready", "pt_session_id"} {
		resp, m := call(t, srv, tok, "POST", "/v1/sandboxes", `{"template":"busybox","metadata":{"`+k+`":"1"}}`)
		if resp.StatusCode != 400 || m["code"] != "invalid_request" || m["field"] != "metadata" {
			t.Errorf("create with %s: %d %v", k, resp.StatusCode, m)
		}
	}
	if _, m := call(t, srv, tok, "GET", "/v1/sandboxes", ""); len(m["rows"].([]any)) != 0 {
		t.Fatalf("refused creates made sandboxes: %v", m)
	}
}
