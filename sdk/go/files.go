package platinum

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"time"
)

// ErrIsDirectory is returned (wrapped) by Download when the path is a
// directory; list it with ListFiles instead.
var ErrIsDirectory = errors.New("is a directory")

// ErrNotDirectory is returned (wrapped) by ListFiles when the path is a
// file; read it with Download instead.
var ErrNotDirectory = errors.New("not a directory")

// FileEntry is one entry of a directory listing in a sandbox.
type FileEntry struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// Type is "file", "dir" or "symlink".
	Type string `json:"type"`
	Size int64  `json:"size"`
	// Mode is in ls -l form, e.g. "-rw-r--r--".
	Mode       string    `json:"mode"`
	ModifiedAt time.Time `json:"modified_at"`
}

func filesPath(id string) string { return "/v1/sandboxes/" + url.PathEscape(id) + "/files" }

// Upload writes everything r yields to path in the sandbox, creating or
// replacing the file. The body is streamed as it is read, never buffered, so
// any size the sandbox's disk can hold works. Upload does not close r.
// A full disk gives an APIError with code no_space.
func (s *SandboxesService) Upload(ctx context.Context, id, path string, r io.Reader) error {
	// Hide any Close method: the transport closes a request body that has
	// one, and r (os.Stdin, say) belongs to the caller.
	req, err := s.c.newRequest(ctx, "PUT", filesPath(id), url.Values{"path": {path}}, struct{ io.Reader }{r})
	if err != nil {
		return fmt.Errorf("upload %s to sandbox %s: %w", path, id, err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := s.c.send(req)
	if err != nil {
		return fmt.Errorf("upload %s to sandbox %s: %w", path, id, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return nil
}

// Download opens the file at path in the sandbox for reading; the caller
// must close it. The content streams from the sandbox as it is read. A
// directory gives an error wrapping ErrIsDirectory; a missing path an
// APIError with code not_found.
func (s *SandboxesService) Download(ctx context.Context, id, path string) (io.ReadCloser, error) {
	resp, err := s.getFiles(ctx, id, path)
	if err != nil {
		return nil, fmt.Errorf("download %s from sandbox %s: %w", path, id, err)
	}
	if isJSON(resp) {
		resp.Body.Close()
		return nil, fmt.Errorf("download %s from sandbox %s: %w", path, id, ErrIsDirectory)
	}
	return resp.Body, nil
}

// ListFiles lists the directory at path in the sandbox. A file gives an
// error wrapping ErrNotDirectory; a missing path an APIError with code
// not_found.
func (s *SandboxesService) ListFiles(ctx context.Context, id, path string) ([]FileEntry, error) {
	resp, err := s.getFiles(ctx, id, path)
	if err != nil {
		return nil, fmt.Errorf("list %s in sandbox %s: %w", path, id, err)
	}
	defer resp.Body.Close()
	if !isJSON(resp) {
		return nil, fmt.Errorf("list %s in sandbox %s: %w", path, id, ErrNotDirectory)
	}
	var out struct {
		Entries []FileEntry `json:"entries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("list %s in sandbox %s: decode response: %w", path, id, err)
	}
	if out.Entries == nil {
		out.Entries = []FileEntry{}
	}
	return out.Entries, nil
}

func (s *SandboxesService) getFiles(ctx context.Context, id, path string) (*http.Response, error) {
	return s.c.openJSON(ctx, "GET", filesPath(id), url.Values{"path": {path}}, "", nil, "", false)
}

func isJSON(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "application/json"
}

// MakeDir creates the directory at path in the sandbox, with any missing
// parents, and reports whether it had to create it (false: it existed).
func (s *SandboxesService) MakeDir(ctx context.Context, id, path string) (created bool, err error) {
	return fetchField[bool](ctx, s.c, "POST", filesPath(id)+"/mkdir", nil, map[string]string{"path": path}, "created", "mkdir %s in sandbox %s", path, id)
}

// RemoveFile removes path in the sandbox; a directory is removed with all
// its contents. A missing path gives an APIError with code not_found.
func (s *SandboxesService) RemoveFile(ctx context.Context, id, path string) error {
	return callJSON(ctx, s.c, "DELETE", filesPath(id), url.Values{"path": {path}}, nil, "remove %s in sandbox %s", path, id)
}
