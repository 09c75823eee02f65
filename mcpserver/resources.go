package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// Resource URIs. A file's path is the template's {+path} (reserved
// expansion), so its slashes stay slashes:
// platinum://sandboxes/sbx_…/files/etc/os-release is /etc/os-release.
const (
	FilesTemplate = "platinum://sandboxes/{id}/files/{+path}"
	TemplatesURI  = "platinum://templates"
)

// fileURI is the resource URI of a file in a sandbox.
func fileURI(id, path string) string {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "platinum://sandboxes/" + url.PathEscape(id) + "/files/" + strings.Join(segs, "/")
}

// parseFileURI returns the sandbox ID and absolute path a file URI names.
func parseFileURI(uri string) (id, path string, err error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "platinum" || u.Host != "sandboxes" {
		return "", "", fmt.Errorf("not a sandbox file URI: %q (want %s)", uri, FilesTemplate)
	}
	id, rest, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/files/")
	if !ok || id == "" || strings.Contains(id, "/") || rest == "" {
		return "", "", fmt.Errorf("not a sandbox file URI: %q (want %s)", uri, FilesTemplate)
	}
	return id, "/" + rest, nil
}

func registerResources(s *mcp.Server, t *tools) {
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "sandbox-file",
		Title:       "File in a sandbox",
		URITemplate: FilesTemplate,
		Description: fmt.Sprintf("A file in a sandbox, by absolute path (at most %d MiB): text as text, anything else as a base64 blob.", MaxReadBytes>>20),
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		id, path, err := parseFileURI(uri)
		if err != nil {
			return nil, err
		}
		b, err := read(ctx, t.forCall(req.Extra).c, id, path)
		if platinum.IsNotFound(err) {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		if err != nil {
			return nil, toolError(err)
		}
		rc := &mcp.ResourceContents{URI: uri}
		if utf8.Valid(b) {
			rc.MIMEType, rc.Text = "text/plain; charset=utf-8", string(b)
		} else {
			rc.MIMEType, rc.Blob = http.DetectContentType(b), b
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{rc}}, nil
	})
	s.AddResource(&mcp.Resource{
		Name:        "templates",
		Title:       "Sandbox templates",
		URI:         TemplatesURI,
		MIMEType:    "application/json",
		Description: "The templates create_sandbox can start from (slug, build status, default), as JSON.",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		tpls, err := t.forCall(req.Extra).c.Templates.List(ctx)
		if err != nil {
			return nil, toolError(err)
		}
		b, err := json.MarshalIndent(tpls, "", "  ")
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: TemplatesURI, MIMEType: "application/json", Text: string(b)}}}, nil
	})
}
