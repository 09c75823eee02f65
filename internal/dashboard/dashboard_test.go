package dashboard

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"testing/fstest"

	"github.com/platinum-dev/platinum/web"
)

// TestRoutes checks which requests the dashboard answers, with which
// caching, and that API paths fall through to the next handler.
func TestRoutes(t *testing.T) {
	files := fstest.MapFS{
		"index.html":          {Data: []byte("<!doctype html><title>Platinum</title>")},
		"assets/index-abc.js": {Data: []byte("console.log(1)")},
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Next", "1")
		w.WriteHeader(http.StatusTeapot)
	})
	h := Mount(next, files)
	tests := []struct {
		method, path string
		status       int
		next         bool
		cache        string
		body         string
	}{
		{"GET", "/", 200, false, "no-cache", "<!doctype html><title>Platinum</title>"},
		{"GET", "/index.html", 200, false, "no-cache", "<!doctype html><title>Platinum</title>"},
		{"GET", "/sandbox/sbx_01K", 200, false, "no-cache", "<!doctype html><title>Platinum</title>"},
		{"GET", "/sandbox/sbx_01K/terminal", 200, false, "no-cache", "<!doctype html><title>Platinum</title>"},
		{"GET", "/new", 200, false, "no-cache", "<!doctype html><title>Platinum</title>"},
		{"GET", "/usage", 200, false, "no-cache", "<!doctype html><title>Platinum</title>"},
		{"GET", "/template", 200, false, "no-cache", "<!doctype html><title>Platinum</title>"},
		{"GET", "/template/busybox", 200, false, "no-cache", "<!doctype html><title>Platinum</title>"},
		{"HEAD", "/", 200, false, "no-cache", ""},
		{"GET", "/assets/index-abc.js", 200, false, "public, max-age=31536000, immutable", "console.log(1)"},
		{"GET", "/assets/missing.js", 404, false, "", ""},
		{"GET", "/assets/../index.html", 418, true, "", ""},
		{"POST", "/", 418, true, "", ""},
		{"GET", "/sandbox/", 418, true, "", ""},
		{"GET", "/template/", 418, true, "", ""},
		{"GET", "/new/x", 418, true, "", ""},
		{"POST", "/new", 418, true, "", ""},
		// Every other surface of the listener is left alone.
		{"GET", "/v1/sandboxes", 418, true, "", ""},
		{"GET", "/healthz", 418, true, "", ""},
		{"POST", "/mcp", 418, true, "", ""},
		{"GET", "/daytona/api/sandbox", 418, true, "", ""},
		{"GET", "/sandboxes", 418, true, "", ""},
		{"GET", "/sandboxes/abc", 418, true, "", ""},
		{"GET", "/v2/sandboxes", 418, true, "", ""},
		{"GET", "/templates", 418, true, "", ""},
		{"GET", "/templates/busybox", 418, true, "", ""},
		{"GET", "/health", 418, true, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d", rec.Code, tt.status)
			}
			if got := rec.Header().Get("X-Next") == "1"; got != tt.next {
				t.Fatalf("passed to next: %v, want %v", got, tt.next)
			}
			if tt.cache != "" {
				if got := rec.Header().Get("Cache-Control"); got != tt.cache {
					t.Errorf("Cache-Control %q, want %q", got, tt.cache)
				}
				if got := rec.Header().Get("Content-Security-Policy"); got != CSP {
					t.Errorf("Content-Security-Policy %q, want %q", got, CSP)
				}
			}
			if tt.body != "" && rec.Body.String() != tt.body {
				t.Errorf("body %q, want %q", rec.Body.String(), tt.body)
			}
		})
	}
}

// TestEmbeddedBuild checks that the embedded build has an index.html whose
// scripts and styles are files under /assets/ (no inline script, which
// the CSP would block) and that each one is served.
func TestEmbeddedBuild(t *testing.T) {
	h := Mount(http.NotFoundHandler(), web.Dist())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	body := rec.Body.String()
	if rec.Code != 200 {
		t.Fatalf("GET / = %d", rec.Code)
	}
	refs := assetRefs.FindAllStringSubmatch(body, -1)
	if len(refs) < 2 {
		t.Fatalf("index.html names %d assets, want a script and a stylesheet:\n%s", len(refs), body)
	}
	if inlineScript.MatchString(body) {
		t.Fatalf("index.html has an inline script:\n%s", body)
	}
	for _, m := range refs {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", m[1], nil))
		if rec.Code != 200 || rec.Body.Len() == 0 {
			t.Errorf("GET %s = %d (%d bytes)", m[1], rec.Code, rec.Body.Len())
		}
	}
}

var (
	assetRefs    = regexp.MustCompile(`(?:src|href)="(/assets/[^"]+)"`)
	inlineScript = regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`)
)
