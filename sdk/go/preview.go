package platinum

import (
	"context"
	"net/url"
	"strconv"
	"time"
)

// Preview-proxy names a client sends or reads.
const (
	// PreviewTokenHeader carries a preview token on each request.
	PreviewTokenHeader = "X-Pt-Preview-Token"
	// PreviewTokenQuery carries it once in a browser link: the proxy
	// turns it into a cookie and redirects to the clean URL.
	PreviewTokenQuery = "pt_token"
	// PreviewReasonHeader says why the proxy did not reach the sandbox,
	// e.g. PreviewReasonAutoResumeDisabled with a 404.
	PreviewReasonHeader = "X-Pt-Reason"
	// PreviewReasonAutoResumeDisabled: the sandbox is stopped and its
	// auto_resume is off; only Start brings it back.
	PreviewReasonAutoResumeDisabled = "auto-resume-disabled"
)

// PreviewURL is how to reach one port of a sandbox through ptd's preview
// proxy. A request to it wakes a stopped or archived sandbox (unless its
// auto_resume is off).
type PreviewURL struct {
	SandboxID string `json:"sandbox_id"`
	Port      int    `json:"port"`
	// URL routes by host name: <port>-<sandbox id>.<preview domain>.
	URL string `json:"url"`
	// PathURL routes by path, for clients that cannot set Host:
	// <proxy>/<sandbox id>/<port>/.
	PathURL string `json:"path_url"`
	// BrowserURL is URL with the token in the query string, for a
	// browser: the first visit trades it for a cookie.
	BrowserURL string `json:"browser_url"`
	// Token must accompany requests (PreviewTokenHeader) unless Public.
	Token string `json:"token"`
	// Public is true when the port answers without a token.
	Public bool `json:"public"`
	// ExpiresAt is when Token stops working; nil means until revoked.
	ExpiresAt *time.Time `json:"expires_at"`
}

// PreviewOptions tune PreviewURL.
type PreviewOptions struct {
	// ExpiresIn is the token's lifetime, whole seconds; 0 means until
	// revoked.
	ExpiresIn time.Duration
}

func previewPath(id string, port int) string {
	return sandboxPath(id) + "/preview-urls/" + strconv.Itoa(port)
}

// PreviewURL returns the preview URLs of a sandbox's port and a token for
// them. Tokens are signed, not stored: PreviewURL can be called as often
// as needed, and RevokePreview ends all of a port's tokens at once.
func (s *SandboxesService) PreviewURL(ctx context.Context, id string, port int, opts *PreviewOptions) (*PreviewURL, error) {
	q := url.Values{}
	if opts != nil && opts.ExpiresIn > 0 {
		q.Set("expires_in_seconds", strconv.FormatInt(int64(opts.ExpiresIn.Round(time.Second)/time.Second), 10))
	}
	return fetchJSON[PreviewURL](ctx, s.c, "GET", previewPath(id, port), q, nil, "preview url %s:%d", id, port)
}

// SetPreviewPublic makes a port reachable without a token (public true)
// or only with one, and returns its URLs with a fresh token.
func (s *SandboxesService) SetPreviewPublic(ctx context.Context, id string, port int, public bool) (*PreviewURL, error) {
	return fetchJSON[PreviewURL](ctx, s.c, "POST", previewPath(id, port), nil, map[string]bool{"public": public}, "preview public %s:%d", id, port)
}

// RevokePreview ends every token issued so far for a port and makes the
// port private again.
func (s *SandboxesService) RevokePreview(ctx context.Context, id string, port int) error {
	return callJSON(ctx, s.c, "DELETE", previewPath(id, port), nil, nil, "revoke preview %s:%d", id, port)
}
