package platinum

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"time"
)

// Artifact is a file, or a directory as a tar, exported from a sandbox into
// the object store. It belongs to the org and outlives the sandbox.
type Artifact struct {
	ID        string `json:"id"`
	SandboxID string `json:"sandbox_id"`
	// Name is the download file name.
	Name string `json:"name"`
	// Path is where in the sandbox it came from.
	Path string `json:"path"`
	// Kind is "file" or "directory" (stored as a tar stream).
	Kind        string    `json:"kind"`
	ContentType string    `json:"content_type"`
	SizeBytes   int64     `json:"size_bytes"`
	SHA256      string    `json:"sha256"`
	CreatedAt   time.Time `json:"created_at"`
}

// ArtifactCreate exports Path of a running sandbox; Name is the download
// file name (default: the path's base name, plus ".tar" for a directory).
type ArtifactCreate struct {
	Path string `json:"path"`
	Name string `json:"name,omitempty"`
}

// ArtifactsService exports and fetches artifacts. Get it from
// Client.Artifacts.
type ArtifactsService struct {
	c *Client
}

// Create copies a file or directory out of a running sandbox and returns
// the stored artifact once the copy is whole.
func (s *ArtifactsService) Create(ctx context.Context, sandboxID string, req ArtifactCreate) (*Artifact, error) {
	return fetchJSON[Artifact](ctx, s.c, "POST", "/v1/sandboxes/"+url.PathEscape(sandboxID)+"/artifacts", nil, req, "create artifact of %s", sandboxID)
}

// List returns the org's artifacts, newest first; sandboxID (optional)
// keeps one sandbox's.
func (s *ArtifactsService) List(ctx context.Context, sandboxID string) ([]Artifact, error) {
	q := url.Values{}
	if sandboxID != "" {
		q.Set("sandbox_id", sandboxID)
	}
	return nonNil(fetchRows[Artifact](ctx, s.c, "GET", "/v1/artifacts", q, nil, "list artifacts"))
}

// Get returns one artifact.
func (s *ArtifactsService) Get(ctx context.Context, id string) (*Artifact, error) {
	return fetchJSON[Artifact](ctx, s.c, "GET", "/v1/artifacts/"+url.PathEscape(id), nil, nil, "artifact %s", id)
}

// Download opens the artifact's bytes (a tar stream for a directory); the
// caller closes them.
func (s *ArtifactsService) Download(ctx context.Context, id string) (io.ReadCloser, error) {
	req, err := s.c.newRequest(ctx, "GET", "/v1/artifacts/"+url.PathEscape(id)+"/content", nil, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.c.send(req)
	if err != nil {
		return nil, fmt.Errorf("download artifact %s: %w", id, err)
	}
	return resp.Body, nil
}

// Delete removes the artifact and its stored bytes.
func (s *ArtifactsService) Delete(ctx context.Context, id string) error {
	return callJSON(ctx, s.c, "DELETE", "/v1/artifacts/"+url.PathEscape(id), nil, nil, "delete artifact %s", id)
}
