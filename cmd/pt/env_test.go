package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// recordingTransport answers every request with an empty sandbox list and
// remembers what was asked.
type recordingTransport struct{ reqs []*http.Request }

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.reqs = append(rt.reqs, r)
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"rows":[]}`)), Request: r}, nil
}

// TestDefaultAPIURL: without PT_API_URL, pt talks to http://127.0.0.1:7070
// (ptd's default --listen) with PT_TOKEN as the bearer token.
func TestDefaultAPIURL(t *testing.T) {
	rt := &recordingTransport{}
	var stdout, stderr strings.Builder
	a := &app{
		stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""),
		getenv:       func(k string) string { return map[string]string{"PT_TOKEN": "tok_env"}[k] },
		pollInterval: time.Millisecond,
		httpClient:   &http.Client{Transport: rt},
	}
	if code := a.run(t.Context(), []string{"sandbox", "list", "--json"}); code != 0 {
		t.Fatalf("exit %d stderr %q", code, stderr.String())
	}
	if len(rt.reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(rt.reqs))
	}
	r := rt.reqs[0]
	if got := r.URL.Scheme + "://" + r.URL.Host; got != "http://127.0.0.1:7070" {
		t.Errorf("pt called %s, want http://127.0.0.1:7070", got)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer tok_env" {
		t.Errorf("Authorization = %q, want the PT_TOKEN bearer", got)
	}
}
