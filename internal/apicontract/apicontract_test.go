package apicontract

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDocumentIsValid: api/openapi.yaml loads and validates (schemas,
// references, and every example against its schema).
func TestDocumentIsValid(t *testing.T) {
	if _, _, err := Document(); err != nil {
		t.Fatal(err)
	}
	ops, err := Operations()
	if err != nil || len(ops) < 50 {
		t.Fatalf("operations: %d, %v", len(ops), err)
	}
}

// TestTransportCatchesDrift: the transport refuses answers and
// acceptances the document does not describe, and passes what it does.
func TestTransportCatchesDrift(t *testing.T) {
	var status int
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c := &http.Client{Transport: Transport(http.DefaultTransport)}
	do := func(method, path, reqBody string) error {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(reqBody))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	hosts := `{"rows":[{"id":"host_1","lxcfs":false,"runtime_classes":[{"name":"runc","stop_keeps_memory":"freeze","checkpoint":false}]}]}`
	notFound := `{"code":"not_found","error":"no","request_id":"req_1"}`
	orgCreated := `{"org":{"id":"org_1","name":"a","created_at":"2026-11-29T15:04:05.123456Z"},"token":"pt_x"}`
	invalid := `{"code":"invalid_request","error":"unknown field","field":"bogus"}`

	// An address nobody registered is not checked at all.
	status, body = 200, `{"anything":1}`
	if err := do("GET", "/v1/hosts", ""); err != nil {
		t.Fatalf("unregistered address checked: %v", err)
	}
	unregister := Register(srv.URL)
	t.Cleanup(unregister)
	for _, tt := range []struct {
		name, method, path, req string
		status                  int
		body, wantProblem       string
	}{
		{"conforming", "GET", "/v1/hosts", "", 200, hosts, ""},
		{"documented error", "GET", "/v1/sandboxes/sbx_1", "", 404, notFound, ""},
		{"undeclared field", "GET", "/v1/hosts", "", 200, strings.Replace(hosts, `"lxcfs":false`, `"lxcfs":false,"surprise":1`, 1), "$.rows[0].surprise"},
		{"wrong type", "GET", "/v1/hosts", "", 200, `{"rows":[{"id":7}]}`, "answer:"},
		{"undocumented status", "GET", "/v1/hosts", "", 418, notFound, "418"},
		{"forbidden request accepted", "POST", "/v1/orgs", `{"name":"a","bogus":1}`, 201, `{}`, "accepted a request the document forbids"},
		{"idempotency key in the body", "POST", "/v1/orgs", `{"name":"a","idempotency_key":"k1"}`, 201, orgCreated, ""},
		{"its camelCase spelling", "POST", "/v1/orgs", `{"name":"a","idempotencyKey":"k1"}`, 201, orgCreated, ""},
		{"forbidden request refused", "POST", "/v1/orgs", `{"name":"a","bogus":1}`, 400, invalid, ""},
		{"2xx on an undocumented path", "GET", "/v1/no-such-thing", "", 200, `{}`, "no operation"},
		{"404 on an undocumented path", "GET", "/v1/no-such-thing", "", 404, notFound, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body = tt.status, tt.body
			err := do(tt.method, tt.path, tt.req)
			var ve *ViolationError
			switch {
			case tt.wantProblem == "" && err != nil:
				t.Errorf("conforming call refused: %v", err)
			case tt.wantProblem != "" && (!errors.As(err, &ve) || !strings.Contains(err.Error(), tt.wantProblem)):
				t.Errorf("err = %v, want a violation naming %q", err, tt.wantProblem)
			}
		})
	}
	if len(Violations()) == 0 {
		t.Error("violations were not recorded")
	}
}
