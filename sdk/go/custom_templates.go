package platinum

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"
)

// An org's own templates, built from an image, an image tarball or a
// Dockerfile (docs/templates.md). Every build that succeeds adds an
// immutable version of the slug; one that fails adds none.

// TemplateSettings are what sandboxes of an org's template start with.
type TemplateSettings struct {
	// StartCmd runs in the background at every cold boot; a create reports
	// running only once ReadyCmd exits 0 (within ReadyTimeoutMs).
	StartCmd       []string          `json:"start_cmd,omitempty"`
	ReadyCmd       []string          `json:"ready_cmd,omitempty"`
	ReadyTimeoutMs int               `json:"ready_timeout_ms,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	User           string            `json:"user,omitempty"`
	Workdir        string            `json:"workdir,omitempty"`
	CPU            float64           `json:"cpu,omitempty"`
	RAMMB          int               `json:"ram_mb,omitempty"`
	DiskGB         int               `json:"disk_gb,omitempty"`
	Runtime        string            `json:"runtime,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	ExposedPorts   []string          `json:"exposed_ports,omitempty"`
}

// TemplateSource says where a version of an org's template came from.
type TemplateSource struct {
	// Kind is image, upload or dockerfile.
	Kind             string `json:"kind"`
	Image            string `json:"image,omitempty"`
	ImageDigest      string `json:"image_digest,omitempty"`
	FromTemplate     string `json:"from_template,omitempty"`
	DockerfileSHA256 string `json:"dockerfile_sha256,omitempty"`
}

// TemplateSettingsInput overrides what the image or Dockerfile says. Nil
// fields keep it; StartCmd or ReadyCmd set to an empty (non-nil) slice
// clears it.
type TemplateSettingsInput struct {
	StartCmd       []string          `json:"start_cmd,omitempty"`
	ReadyCmd       []string          `json:"ready_cmd,omitempty"`
	ReadyTimeoutMs int               `json:"ready_timeout_ms,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	User           string            `json:"user,omitempty"`
	Workdir        string            `json:"workdir,omitempty"`
	CPU            float64           `json:"cpu,omitempty"`
	RAMMB          int               `json:"ram_mb,omitempty"`
	DiskGB         int               `json:"disk_gb,omitempty"`
	Runtime        string            `json:"runtime,omitempty"`
}

// MarshalJSON keeps an empty StartCmd or ReadyCmd (which clears the
// image's) apart from an absent one.
func (s TemplateSettingsInput) MarshalJSON() ([]byte, error) {
	type plain TemplateSettingsInput
	b, err := json.Marshal(plain(s))
	if err != nil || (s.StartCmd == nil || len(s.StartCmd) > 0) && (s.ReadyCmd == nil || len(s.ReadyCmd) > 0) {
		return b, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if s.StartCmd != nil && len(s.StartCmd) == 0 {
		m["start_cmd"] = []string{}
	}
	if s.ReadyCmd != nil && len(s.ReadyCmd) == 0 {
		m["ready_cmd"] = []string{}
	}
	return json.Marshal(m)
}

// CreateTemplateRequest builds a version of an org's template from
// exactly one of FromImage, ImageUploadID and Dockerfile.
type CreateTemplateRequest struct {
	Slug string `json:"slug"`
	// FromImage is pulled with the org's stored registry credentials.
	FromImage string `json:"from_image,omitempty"`
	// ImageUploadID is an upload of purpose image (UploadImage).
	ImageUploadID string `json:"image_upload_id,omitempty"`
	// Dockerfile is the Dockerfile's text; ContextUploadID the build
	// context it reads (UploadContext).
	Dockerfile      string            `json:"dockerfile,omitempty"`
	ContextUploadID string            `json:"context_upload_id,omitempty"`
	BuildArgs       map[string]string `json:"build_args,omitempty"`
	NoCache         bool              `json:"no_cache,omitempty"`
	// Snapshot checkpoints the started sandbox (gVisor), so creates of
	// its size and class restore it (Sandbox.Restore "memory").
	Snapshot       bool                   `json:"snapshot,omitempty"`
	Network        *NetworkPolicy         `json:"network,omitempty"`
	TimeoutSeconds int                    `json:"timeout_seconds,omitempty"`
	Settings       *TemplateSettingsInput `json:"settings,omitempty"`
}

// BuildStatus is where a template build is.
type BuildStatus string

// Template build statuses.
const (
	BuildRunning BuildStatus = "running"
	BuildReady   BuildStatus = "ready"
	BuildFailed  BuildStatus = "failed"
)

// BuildFailure locates a failed Dockerfile step.
type BuildFailure struct {
	Step        int    `json:"step"`
	Steps       int    `json:"steps"`
	Line        int    `json:"line"`
	Instruction string `json:"instruction"`
	// ExitCode is a failed RUN's, nil for other failures.
	ExitCode *int `json:"exit_code,omitempty"`
}

// TemplateBuild is one build of an org's template.
type TemplateBuild struct {
	ID     string      `json:"id"`
	Slug   string      `json:"slug"`
	Status BuildStatus `json:"status"`
	// Kind is image, upload or dockerfile.
	Kind string `json:"kind"`
	// VersionID and Version are the version a ready build made.
	VersionID  string        `json:"version_id,omitempty"`
	Version    int           `json:"version,omitempty"`
	Error      string        `json:"error,omitempty"`
	Failure    *BuildFailure `json:"failure,omitempty"`
	CreatedAt  time.Time     `json:"created_at"`
	UpdatedAt  time.Time     `json:"updated_at"`
	FinishedAt *time.Time    `json:"finished_at,omitempty"`
}

// BuildLogLine is one line of a build's log.
type BuildLogLine struct {
	Seq  int       `json:"seq"`
	Time time.Time `json:"time"`
	// Type is step, cache, output, pull, info, error or done.
	Type        string `json:"type"`
	Step        int    `json:"step,omitempty"`
	Steps       int    `json:"steps,omitempty"`
	Line        int    `json:"line,omitempty"`
	Instruction string `json:"instruction,omitempty"`
	// Cached is a cache line's hit (or a pull line's stored layer).
	Cached     bool   `json:"cached,omitempty"`
	DurationMs int64  `json:"duration_ms,omitempty"`
	Stream     string `json:"stream,omitempty"`
	Text       string `json:"text,omitempty"`
	Layer      string `json:"layer,omitempty"`
	Bytes      int64  `json:"bytes,omitempty"`
	Total      int64  `json:"total,omitempty"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	Status     string `json:"status,omitempty"`
	VersionID  string `json:"version_id,omitempty"`
}

// TemplateUpload is an uploaded build context or image tarball.
type TemplateUpload struct {
	ID        string `json:"id"`
	Purpose   string `json:"purpose"`
	SizeBytes int64  `json:"size_bytes"`
	SHA256    string `json:"sha256"`
}

// Create starts a build of an org's template; the server checks the
// request, the Dockerfile and the image at once (an APIError with code
// image_not_found, image_unauthorized, dockerfile_invalid (Line says
// where), …) and runs the build in the background. Follow it with Logs or
// Wait.
func (s *TemplatesService) Create(ctx context.Context, req CreateTemplateRequest) (*TemplateBuild, error) {
	return fetchJSON[TemplateBuild](ctx, s.c, "POST", "/v1/templates", nil, req, "create template %s", req.Slug)
}

// UploadContext streams a build context tar (see PackContext); past the
// server's limit it is an APIError with code upload_too_large.
func (s *TemplatesService) UploadContext(ctx context.Context, tar io.Reader) (*TemplateUpload, error) {
	return s.upload(ctx, "context", tar)
}

// UploadImage streams an image tarball (`docker save` output or an OCI
// layout packed as a tar).
func (s *TemplatesService) UploadImage(ctx context.Context, tar io.Reader) (*TemplateUpload, error) {
	return s.upload(ctx, "image", tar)
}

func (s *TemplatesService) upload(ctx context.Context, purpose string, r io.Reader) (*TemplateUpload, error) {
	req, err := s.c.newRequest(ctx, "POST", "/v1/templates/uploads", url.Values{"purpose": {purpose}}, struct{ io.Reader }{r})
	if err != nil {
		return nil, fmt.Errorf("upload %s: %w", purpose, err)
	}
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := s.c.send(req)
	if err != nil {
		return nil, fmt.Errorf("upload %s: %w", purpose, err)
	}
	defer resp.Body.Close()
	var up TemplateUpload
	if err := json.NewDecoder(resp.Body).Decode(&up); err != nil {
		return nil, fmt.Errorf("upload %s: decode response: %w", purpose, err)
	}
	return &up, nil
}

func buildPath(slug, id string) string {
	return "/v1/templates/" + url.PathEscape(slug) + "/builds/" + url.PathEscape(id)
}

// GetBuild returns one build of an org's template.
func (s *TemplatesService) GetBuild(ctx context.Context, slug, id string) (*TemplateBuild, error) {
	return fetchJSON[TemplateBuild](ctx, s.c, "GET", buildPath(slug, id), nil, nil, "template build %s", id)
}

// BuildLog is a build's log being read.
type BuildLog struct {
	body io.ReadCloser
	dec  *json.Decoder
}

// Next returns the next line; io.EOF once the log (or, without follow,
// what there is of it) is read.
func (l *BuildLog) Next() (BuildLogLine, error) {
	var line BuildLogLine
	if err := l.dec.Decode(&line); err != nil {
		if errors.Is(err, io.EOF) {
			return line, io.EOF
		}
		return line, fmt.Errorf("%w: %w", ErrStreamEnded, err)
	}
	return line, nil
}

// Close ends the read.
func (l *BuildLog) Close() error { return l.body.Close() }

// Logs opens a build's log from after line since; with follow it goes on
// until the build ends.
func (s *TemplatesService) Logs(ctx context.Context, slug, id string, since int, follow bool) (*BuildLog, error) {
	q := url.Values{"since": {fmt.Sprint(since)}}
	if follow {
		q.Set("follow", "true")
	}
	req, err := s.c.newRequest(ctx, "GET", buildPath(slug, id)+"/logs", q, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := s.c.send(req)
	if err != nil {
		return nil, fmt.Errorf("template build %s logs: %w", id, err)
	}
	return &BuildLog{body: resp.Body, dec: json.NewDecoder(resp.Body)}, nil
}

// Wait follows a build's log until it ends, handing each line to onLine
// (which may be nil), and returns the build as it ended. A build that
// failed is returned with a nil error: look at Status, Error and Failure.
func (s *TemplatesService) Wait(ctx context.Context, slug, id string, onLine func(BuildLogLine)) (*TemplateBuild, error) {
	seq := 0
	for {
		l, err := s.Logs(ctx, slug, id, seq, true)
		if err != nil {
			return nil, err
		}
		for {
			line, err := l.Next()
			if err != nil {
				break
			}
			seq = line.Seq
			if onLine != nil {
				onLine(line)
			}
		}
		l.Close()
		b, err := s.GetBuild(ctx, slug, id)
		if err != nil {
			return nil, err
		}
		if b.Status != BuildRunning {
			return b, nil
		}
		// The stream broke off: pick it up where it stopped.
		if err := sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

// Delete deletes every version of an org's template and returns their
// IDs. Versions sandboxes or snapshots still use are an APIError with
// code template_in_use (nothing is deleted then).
func (s *TemplatesService) Delete(ctx context.Context, slug string) ([]string, error) {
	return fetchField[[]string](ctx, s.c, "DELETE", "/v1/templates/"+url.PathEscape(slug), nil, nil, "deleted", "delete template %s", slug)
}

// DeleteVersion deletes one version of an org's template.
func (s *TemplatesService) DeleteVersion(ctx context.Context, slug, versionID string) error {
	return callJSON(ctx, s.c, "DELETE", "/v1/templates/"+url.PathEscape(slug)+"/versions/"+url.PathEscape(versionID), nil, nil, "delete template version %s", versionID)
}

// RegistryCredential is an org's stored credentials for a registry, never
// the secret.
type RegistryCredential struct {
	Registry  string    `json:"registry"`
	Username  string    `json:"username,omitempty"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SetRegistryCredential stores the org's credentials for a registry host
// (e.g. "ghcr.io"): a username and password, or a token with the others
// empty. Builds of the org's templates pull from it with them.
func (s *TemplatesService) SetRegistryCredential(ctx context.Context, registry, username, password, token string) (*RegistryCredential, error) {
	in := map[string]string{}
	if username != "" || password != "" {
		in["username"], in["password"] = username, password
	}
	if token != "" {
		in["token"] = token
	}
	return fetchJSON[RegistryCredential](ctx, s.c, "PUT", "/v1/registry-credentials/"+url.PathEscape(registry), nil, in, "registry credentials for %s", registry)
}

// RegistryCredentials lists the registries the org stored credentials for.
func (s *TemplatesService) RegistryCredentials(ctx context.Context) ([]RegistryCredential, error) {
	return fetchRows[RegistryCredential](ctx, s.c, "GET", "/v1/registry-credentials", nil, nil, "registry credentials")
}

// DeleteRegistryCredential forgets the org's credentials for a registry.
func (s *TemplatesService) DeleteRegistryCredential(ctx context.Context, registry string) error {
	return callJSON(ctx, s.c, "DELETE", "/v1/registry-credentials/"+url.PathEscape(registry), nil, nil, "registry credentials for %s", registry)
}
