// Package dashboard serves the web dashboard (docs/dashboard.md) from ptd's
// listener: index.html at / and at the dashboard's own client-side routes,
// its hashed files under /assets/, and every other request to the next
// handler, so /v1, /healthz, /mcp, /daytona and the E2B paths are never
// shadowed.
package dashboard

import (
	"bytes"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"
)

// CSP is the dashboard's Content-Security-Policy: only its own scripts and
// styles (no inline code), API calls and WebSockets to the same origin,
// and no framing.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// clientPages and clientRoutes are the paths and path prefixes the
// dashboard routes in the browser (web/src/router.ts); a reload there gets
// index.html. None is an API path: the names are singular where E2B's API
// has the plural (/templates, /sandboxes).
var (
	clientPages  = []string{"/new", "/usage", "/template"}
	clientRoutes = []string{"/sandbox/", "/template/"}
)

// Mount answers the dashboard's paths from files (a built dist/, see
// package web) and passes every other request to next.
func Mount(next http.Handler, files fs.FS) http.Handler {
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		index = []byte("dashboard not built: run npm run build in web/\n")
	}
	assets := http.FileServerFS(files)
	start := time.Now()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		get := r.Method == http.MethodGet || r.Method == http.MethodHead
		switch {
		case get && (p == "/" || p == "/index.html" || isClientRoute(p)):
			h := w.Header()
			h.Set("Cache-Control", "no-cache")
			securityHeaders(h)
			http.ServeContent(w, r, "index.html", start, bytes.NewReader(index))
		case get && strings.HasPrefix(p, "/assets/") && path.Clean(p) == p:
			if _, err := fs.Stat(files, strings.TrimPrefix(p, "/")); err != nil {
				http.NotFound(w, r)
				return
			}
			h := w.Header()
			// Vite names every file under assets/ by its content's hash.
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
			securityHeaders(h)
			assets.ServeHTTP(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func isClientRoute(p string) bool {
	if slices.Contains(clientPages, p) {
		return true
	}
	for _, pre := range clientRoutes {
		if strings.HasPrefix(p, pre) && len(p) > len(pre) {
			return true
		}
	}
	return false
}

func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}
