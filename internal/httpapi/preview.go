package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// previewPort parses the {port} path value.
func previewPort(r *http.Request) (int, error) {
	n, err := strconv.Atoi(r.PathValue("port"))
	if err != nil {
		return 0, badRequest("port must be a number 1-65535", "port")
	}
	return n, nil
}

func (a *API) getPreviewURL(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	port, err := previewPort(r)
	if err != nil {
		return err
	}
	var expires time.Duration
	if v := r.URL.Query().Get("expires_in_seconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > int64(controlplane.MaxPreviewExpiry/time.Second) {
			return badRequest("expires_in_seconds must be 0 (no expiry) to "+strconv.Itoa(int(controlplane.MaxPreviewExpiry/time.Second)), "expires_in_seconds")
		}
		expires = time.Duration(n) * time.Second
	}
	return respond(w, http.StatusOK, previewView)(a.cp.PreviewURL(r.Context(), p, r.PathValue("id"), port, expires))
}

func (a *API) setPreviewURL(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	port, err := previewPort(r)
	if err != nil {
		return err
	}
	var b struct {
		Public *bool `json:"public"`
	}
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	if b.Public == nil {
		return badRequest("public is required (true or false)", "public")
	}
	return respond(w, http.StatusOK, previewView)(a.cp.SetPreviewPublic(r.Context(), p, r.PathValue("id"), port, *b.Public))
}

func (a *API) revokePreviewURL(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	port, err := previewPort(r)
	if err != nil {
		return err
	}
	return noContent(w, a.cp.RevokePreview(r.Context(), p, r.PathValue("id"), port))
}

func previewView(u controlplane.PreviewURL) map[string]any {
	out := map[string]any{
		"sandbox_id": u.SandboxID, "port": u.Port, "url": u.URL, "path_url": u.PathURL,
		"token": u.Token, "public": u.Public, "expires_at": nil,
		// One link for a browser: the proxy moves the token into a
		// cookie and redirects to url.
		"browser_url": u.URL + "?pt_token=" + u.Token,
	}
	if u.ExpiresAt != nil {
		out["expires_at"] = sandbox.FormatTime(*u.ExpiresAt)
	}
	return out
}
