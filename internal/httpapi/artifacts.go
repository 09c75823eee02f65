package httpapi

import (
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/platinum-dev/platinum/internal/artifacts"
	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

type artifactView struct {
	ID          string `json:"id"`
	SandboxID   string `json:"sandbox_id"`
	Name        string `json:"name"`
	Path        string `json:"path"`
	Kind        string `json:"kind"`
	ContentType string `json:"content_type"`
	SizeBytes   int64  `json:"size_bytes"`
	SHA256      string `json:"sha256"`
	CreatedAt   string `json:"created_at"`
}

func viewArtifact(a artifacts.Artifact) artifactView {
	return artifactView{ID: a.ID, SandboxID: a.SandboxID, Name: a.Name, Path: a.Path, Kind: string(a.Kind),
		ContentType: a.ContentType, SizeBytes: a.SizeBytes, SHA256: a.SHA256, CreatedAt: sandbox.FormatTime(a.CreatedAt)}
}

func (a *API) createArtifact(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b struct {
		Path string `json:"path"`
		Name string `json:"name"`
	}
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	return respond(w, http.StatusCreated, viewArtifact)(a.art.Create(r.Context(), p, r.PathValue("id"), artifacts.Request{Path: b.Path, Name: b.Name}))
}

func (a *API) listArtifacts(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respondRows(w, "rows", viewArtifact)(a.art.List(r.Context(), p, r.URL.Query().Get("sandbox_id")))
}

func (a *API) getArtifact(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respond(w, http.StatusOK, viewArtifact)(a.art.Get(r.Context(), p, r.PathValue("id")))
}

// artifactContent streams the stored bytes with the artifact's content
// type and file name; the ETag is the content's SHA-256.
func (a *API) artifactContent(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	art, rc, err := a.art.Open(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	defer rc.Close()
	h := w.Header()
	h.Set("Content-Type", art.ContentType)
	h.Set("Content-Length", strconv.FormatInt(art.SizeBytes, 10))
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": art.Name}))
	h.Set("ETag", `"`+art.SHA256+`"`)
	h.Set("X-Pt-Sha256", art.SHA256)
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		io.Copy(w, rc)
	}
	return nil
}

func (a *API) deleteArtifact(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return noContent(w, a.art.Delete(r.Context(), p, r.PathValue("id")))
}
