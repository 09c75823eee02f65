package platinum_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestAPIErrorRequestID: the error carries the answer's X-Request-Id, or
// the body's request_id when a proxy dropped the header.
func TestAPIErrorRequestID(t *testing.T) {
	for _, tt := range []struct {
		name, header, body, want string
	}{
		{"header", "req_abc", `{"code":"not_found","error":"gone","request_id":"req_abc"}`, "req_abc"},
		{"body only", "", `{"code":"not_found","error":"gone","request_id":"req_body"}`, "req_body"},
		{"none", "", `{"code":"not_found","error":"gone"}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.header != "" {
					w.Header().Set(platinum.RequestIDHeader, tt.header)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				w.Write([]byte(tt.body))
			}))
			t.Cleanup(srv.Close)
			_, err := platinum.New(srv.URL, "tok").Sandboxes.Get(t.Context(), "sbx_1")
			var ae *platinum.APIError
			if !errors.As(err, &ae) || ae.RequestID != tt.want || ae.Code != platinum.CodeNotFound {
				t.Errorf("err = %#v, want request id %q", err, tt.want)
			}
		})
	}
}
