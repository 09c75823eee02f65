package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/apicontract"
)

// TestMain holds every call the tests make to their servers to
// api/openapi.yaml (apicontract), and fails the run on any violation a
// test did not already fail on.
func TestMain(m *testing.M) {
	apicontract.Install()
	code := m.Run()
	if v := apicontract.Violations(); len(v) > 0 {
		fmt.Fprintf(os.Stderr, "%d calls broke api/openapi.yaml:\n  %s\n", len(v), strings.Join(v, "\n  "))
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// serveAPI serves h for the test, its calls validated against the document.
func serveAPI(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	unregister := apicontract.Register(srv.URL)
	t.Cleanup(func() {
		unregister()
		srv.Close()
	})
	return srv
}

// TestRoutesMatchDocument: every route the router mounts is an operation
// of api/openapi.yaml, and every operation is mounted. E2B's surface
// (internal/compat/e2b) is outside: its paths are E2B's, not under /v1,
// and its contract is the real e2b SDK's (tests/compat/e2b).
func TestRoutesMatchDocument(t *testing.T) {
	ops, err := apicontract.Operations()
	if err != nil {
		t.Fatal(err)
	}
	a := New(Deps{}, nil)
	routes := a.Routes()
	slices.Sort(routes)
	for _, r := range routes {
		if _, found := slices.BinarySearch(ops, r); !found {
			t.Errorf("route %s is mounted but api/openapi.yaml has no such operation", r)
		}
	}
	for _, op := range ops {
		if _, found := slices.BinarySearch(routes, op); !found {
			t.Errorf("api/openapi.yaml documents %s, but no route serves it", op)
		}
	}
}
