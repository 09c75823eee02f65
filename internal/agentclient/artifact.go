package agentclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Artifact opens path inside the sandbox for export: a file's bytes
// (isDir false) or a directory as a tar stream (isDir true). The caller
// closes the stream; a stream the agent had to abort ends in an error,
// never in a clean EOF. sandbox.ErrNotFound when path does not exist,
// sandbox.ErrInvalidArgument when it is neither a file nor a directory.
func (c *Client) Artifact(ctx context.Context, path string) (rc io.ReadCloser, isDir bool, err error) {
	resp, err := c.do(ctx, http.MethodGet, "/artifact", url.Values{"path": {path}}, "", nil)
	if errors.Is(err, sandbox.ErrNotFound) && strings.HasPrefix(err.Error(), "404 page not found") {
		// An agent started before exports existed has no such route.
		return nil, false, fmt.Errorf("the sandbox's agent cannot export artifacts; restart the sandbox to update it: %w", sandbox.ErrUnavailable)
	}
	if err != nil {
		return nil, false, fmt.Errorf("agent artifact %s: %w", path, err)
	}
	return resp.Body, resp.Header.Get("X-Pt-Kind") == "directory", nil
}
