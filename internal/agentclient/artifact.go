package agentclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Artifact opens path inside the sandbox for export: a file's bytes
// (isDir false) or a directory as a tar stream (isDir true). The caller
// closes the stream; a stream the agent had to abort ends in an error,
// never in a clean EOF. sandbox.ErrNotFound when path does not exist,
// sandbox.ErrInvalidArgument when it is neither a file nor a directory.
func (c *Client) Artifact(ctx context.Context, path string) (rc io.ReadCloser, isDir bool, err error) {
	resp, err := c.do(ctx, http.MethodGet, "/artifact", url.Values{"path": {path}}, "", nil)
	if err != nil {
		return nil, false, fmt.Errorf("agent artifact %s: %w", path, err)
	}
	return resp.Body, resp.Header.Get("X-Pt-Kind") == "directory", nil
}
