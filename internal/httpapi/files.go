package httpapi

import (
	"io"
	"net/http"
	"strconv"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

func filePath(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", badRequest("path query parameter is required", "path")
	}
	return p, nil
}

type fileEntryView struct {
	Name       string `json:"name"`
	Path       string `json:"path"`
	Type       string `json:"type"`
	Size       int64  `json:"size"`
	Mode       string `json:"mode"`
	ModifiedAt string `json:"modified_at"`
}

func (a *API) download(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	path, err := filePath(r)
	if err != nil {
		return err
	}
	rc, entries, err := a.cp.Download(r.Context(), p, r.PathValue("id"), path)
	if err != nil {
		return err
	}
	if rc == nil {
		out := make([]fileEntryView, 0, len(entries))
		for _, e := range entries {
			out = append(out, fileEntryView{Name: e.Name, Path: e.Path, Type: e.Type, Size: e.Size,
				Mode: e.Permissions, ModifiedAt: sandbox.FormatTime(e.ModTime)})
		}
		writeJSON(w, http.StatusOK, map[string]any{"entries": out})
		return nil
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	if s, ok := rc.(interface{ Size() int64 }); ok && s.Size() >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(s.Size(), 10))
	}
	w.WriteHeader(http.StatusOK)
	io.Copy(w, rc)
	return nil
}

// countingReader counts the bytes an upload streamed through.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (a *API) upload(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	path, err := filePath(r)
	if err != nil {
		return err
	}
	if r.ContentLength > 0 {
		// A body that would leave the host's data dir too full is refused
		// before a byte of it is written.
		if err := a.cp.EnsureSpace(r.ContentLength); err != nil {
			return err
		}
	}
	cr := &countingReader{r: r.Body}
	if err := a.cp.Upload(r.Context(), p, r.PathValue("id"), path, cr); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": path, "size": cr.n})
	return nil
}

func (a *API) removeFile(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	path, err := filePath(r)
	if err != nil {
		return err
	}
	return noContent(w, a.cp.RemoveFile(r.Context(), p, r.PathValue("id"), path))
}

func (a *API) mkdir(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b struct {
		Path string `json:"path"`
	}
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	if b.Path == "" {
		return badRequest("path is required", "path")
	}
	created, err := a.cp.MakeDir(r.Context(), p, r.PathValue("id"), b.Path)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": b.Path, "created": created})
	return nil
}
