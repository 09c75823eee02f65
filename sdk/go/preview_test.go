package platinum_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestPreviewURLs drives the SDK's preview calls against a server that
// answers as ptd does and records what it was sent.
func TestPreviewURLs(t *testing.T) {
	type call struct{ method, path, query, body string }
	var calls []call
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls = append(calls, call{r.Method, r.URL.Path, r.URL.RawQuery, string(b)})
		switch {
		case r.Method == "DELETE":
			w.WriteHeader(http.StatusNoContent)
		case r.URL.Path == "/v1/sandboxes/sbx_missing/preview-urls/3000":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			io.WriteString(w, `{"code":"not_found","error":"sandbox \"sbx_missing\": not found"}`)
		default:
			exp := any(nil)
			if r.URL.Query().Get("expires_in_seconds") != "" {
				exp = "2030-01-02T03:04:05.000000Z"
			}
			json.NewEncoder(w).Encode(map[string]any{"sandbox_id": "sbx_1", "port": 3000, "url": "http://3000-sbx1.localhost:7071/",
				"path_url": "http://localhost:7071/sbx_1/3000/", "browser_url": "http://3000-sbx1.localhost:7071/?pt_token=pv1.a.b",
				"token": "pv1.a.b", "public": r.Method == "POST", "expires_at": exp})
		}
	}))
	defer srv.Close()
	c := platinum.New(srv.URL, "tok")
	ctx := context.Background()

	u, err := c.Sandboxes.PreviewURL(ctx, "sbx_1", 3000, &platinum.PreviewOptions{ExpiresIn: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	want := &platinum.PreviewURL{SandboxID: "sbx_1", Port: 3000, URL: "http://3000-sbx1.localhost:7071/", PathURL: "http://localhost:7071/sbx_1/3000/",
		BrowserURL: "http://3000-sbx1.localhost:7071/?pt_token=pv1.a.b", Token: "pv1.a.b", ExpiresAt: &exp}
	if !reflect.DeepEqual(want, u) {
		t.Errorf("PreviewURL = %+v, want %+v", u, want)
	}
	if u, err = c.Sandboxes.PreviewURL(ctx, "sbx_1", 3000, nil); err != nil || u.ExpiresAt != nil {
		t.Errorf("no expiry: %+v %v", u, err)
	}
	if u, err = c.Sandboxes.SetPreviewPublic(ctx, "sbx_1", 3000, true); err != nil || !u.Public {
		t.Errorf("SetPreviewPublic: %+v %v", u, err)
	}
	if err := c.Sandboxes.RevokePreview(ctx, "sbx_1", 3000); err != nil {
		t.Errorf("RevokePreview: %v", err)
	}
	_, err = c.Sandboxes.PreviewURL(ctx, "sbx_missing", 3000, nil)
	var ae *platinum.APIError
	if !errors.As(err, &ae) || ae.Code != "not_found" {
		t.Errorf("missing sandbox: %v", err)
	}
	wantCalls := []call{
		{"GET", "/v1/sandboxes/sbx_1/preview-urls/3000", "expires_in_seconds=3600", ""},
		{"GET", "/v1/sandboxes/sbx_1/preview-urls/3000", "", ""},
		{"POST", "/v1/sandboxes/sbx_1/preview-urls/3000", "", `{"public":true}`},
		{"DELETE", "/v1/sandboxes/sbx_1/preview-urls/3000", "", ""},
		{"GET", "/v1/sandboxes/sbx_missing/preview-urls/3000", "", ""},
	}
	if !reflect.DeepEqual(wantCalls, calls) {
		t.Errorf("requests = %+v\nwant %+v", calls, wantCalls)
	}
}
