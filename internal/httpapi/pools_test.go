package httpapi

import (
	"fmt"
	"testing"
)

// TestSetPoolRuntime: PUT /v1/pools/{template} names the pool's runtime
// class in the body or the query (they must agree); without one it is the
// default class's pool, named so in the answer and in GET /v1/pools,
// which lists each class's pool of a template apart. A class the host
// does not run is refused with the field named.
func TestSetPoolRuntime(t *testing.T) {
	srv, _, tok := newServer(t)
	tests := []struct {
		name, path, body string
		status           int
		runtime          string // the answer's, on success
		field            string // the refusal's, on 400
	}{
		{"no class is the default", "/v1/pools/busybox", `{"min_ready":0,"max":1}`, 200, "runc", ""},
		{"the default named is the same pool", "/v1/pools/busybox", `{"min_ready":0,"max":2,"runtime":"runc"}`, 200, "runc", ""},
		{"class in the body", "/v1/pools/busybox", `{"min_ready":0,"max":3,"runtime":"gvisor"}`, 200, "gvisor", ""},
		{"class in the query", "/v1/pools/busybox?runtime=gvisor", `{"min_ready":0,"max":4}`, 200, "gvisor", ""},
		{"query and body differ", "/v1/pools/busybox?runtime=gvisor", `{"min_ready":0,"runtime":"runc"}`, 400, "", "runtime"},
		{"unknown class", "/v1/pools/busybox", `{"min_ready":0,"runtime":"kata"}`, 400, "", "runtime"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, m := call(t, srv, tok, "PUT", tc.path, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("PUT %s %s: %d %v", tc.path, tc.body, resp.StatusCode, m)
			}
			if tc.status == 200 && (m["runtime"] != tc.runtime || m["template"] != "busybox") {
				t.Errorf("answer %v, want runtime %s", m, tc.runtime)
			}
			if tc.status == 400 && m["field"] != tc.field {
				t.Errorf("refusal %v, want field %s", m, tc.field)
			}
		})
	}
	resp, m := call(t, srv, tok, "GET", "/v1/pools", "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/pools: %d %v", resp.StatusCode, m)
	}
	var got []string
	for _, p := range m["pools"].([]any) {
		p := p.(map[string]any)
		got = append(got, fmt.Sprintf("%v@%v=%v", p["template"], p["runtime"], p["max"]))
	}
	if want := []string{"busybox@runc=2", "busybox@gvisor=4"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("GET /v1/pools = %v, want %v", got, want)
	}
}
