package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestErrorShowsRequestID: pt prints the request id of a failed call, so a
// user can quote it and an operator find ptd's log lines about it.
func TestErrorShowsRequestID(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req_0123456789abcdef01234567")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"code":"internal","error":"internal error; retry, and report it if it persists","request_id":"req_0123456789abcdef01234567"}`))
	}))
	t.Cleanup(srv.Close)
	var stdout, stderr strings.Builder
	env := map[string]string{"PT_API_URL": srv.URL, "PT_TOKEN": "tok"}
	a := &app{stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""), getenv: func(k string) string { return env[k] }}
	if code := a.run(t.Context(), []string{"sandbox", "get", "sbx_1"}); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	want := "pt: internal error; retry, and report it if it persists\nhint: this is a bug in ptd; its log has the details\nrequest id: req_0123456789abcdef01234567 (ptd's logs name it; quote it when reporting this)\n"
	if stderr.String() != want {
		t.Errorf("stderr = %q, want %q", stderr.String(), want)
	}
}
