package httpapi

import (
	"fmt"
	"net/http"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// serveMetrics is GET /metrics on the API listener: the Prometheus text
// format, for platform admin tokens only. This listener is also the one
// sandboxes reach on their gateway, and the counts (sandboxes, orgs' load,
// errors) are the operator's, not a tenant's. A scraper without a token
// uses ptd's --metrics-listen, a listener of its own that is open because
// only the operator's network reaches it (docs/observability.md).
func (a *API) serveMetrics(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	if !p.PlatformAdmin() {
		return fmt.Errorf("/metrics needs a platform admin token, or ptd's --metrics-listen: %w", sandbox.ErrForbidden)
	}
	a.promHandler.ServeHTTP(w, r)
	return nil
}

// MetricsHandler serves /metrics without authentication, for ptd's
// --metrics-listen listener.
func (a *API) MetricsHandler() http.Handler { return a.promHandler }
