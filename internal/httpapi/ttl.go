package httpapi

import (
	"net/http"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// kill is POST /v1/sandboxes/{id}/kill: the record with status destroyed
// (destroyed_reason user_killed); idempotent by state, so a destroyed
// sandbox answers 200 with its record.
func (a *API) kill(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	if err := decodeJSON(r, &struct{}{}, true); err != nil {
		return err
	}
	return respond(w, http.StatusOK, a.view)(a.cp.Kill(r.Context(), p, r.PathValue("id")))
}

// setTTL is POST /v1/sandboxes/{id}/ttl {"ttl_ms": n}: the countdown
// restarts from now.
func (a *API) setTTL(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b struct {
		TTLMs *int64 `json:"ttl_ms"`
		// TTLMsCamel is the camelCase spelling, setTtl({ ttlMs }).
		TTLMsCamel *int64 `json:"ttlMs"`
	}
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	var err error
	if b.TTLMs, err = aliasPtr(b.TTLMs, b.TTLMsCamel, "ttl_ms", "ttlMs"); err != nil {
		return err
	}
	if b.TTLMs == nil {
		return badRequest("ttl_ms is required: the new lifetime in milliseconds from now", "ttl_ms")
	}
	return respond(w, http.StatusOK, a.view)(a.cp.SetTTL(r.Context(), p, r.PathValue("id"), *b.TTLMs))
}

// templateVersionView is one build of a template.
type templateVersionView struct {
	ID        string `json:"id"`
	Slug      string `json:"slug"`
	Version   int    `json:"version"`
	Status    string `json:"status"`
	Progress  string `json:"progress,omitempty"`
	SizeBytes int64  `json:"size_bytes"`
	Error     string `json:"error,omitempty"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
	customFields
}

func viewTemplateVersion(v controlplane.TemplateVersion) templateVersionView {
	return templateVersionView{
		ID: v.ID, Slug: v.Slug, Version: v.Number, Status: string(v.Status), Progress: v.Progress,
		SizeBytes: v.SizeBytes, Error: v.Error, customFields: viewCustom(&v.TemplateVersion),
		CreatedAt: sandbox.FormatTime(v.CreatedAt), UpdatedAt: sandbox.FormatTime(v.UpdatedAt),
	}
}

// templateVersions is GET /v1/templates/{slug}/versions, newest first.
func (a *API) templateVersions(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respondRows(w, "rows", viewTemplateVersion)(a.cp.TemplateVersionsFor(r.Context(), p, r.PathValue("slug")))
}

// newTemplateVersion is POST /v1/templates/{slug}/builds: 202 with the new
// version, status building.
func (a *API) newTemplateVersion(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	if err := decodeJSON(r, &struct{}{}, true); err != nil {
		return err
	}
	return respond(w, http.StatusAccepted, viewTemplateVersion)(a.cp.NewTemplateVersion(r.Context(), r.PathValue("slug")))
}

// listIncludes reads ?include=destroyed,failed (comma-separated or
// repeated).
func listIncludes(r *http.Request) []string {
	var out []string
	for _, v := range r.URL.Query()["include"] {
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// ttlFields are the TTL and status fields of every sandbox record, embedded
// in sandboxView (JSON flattens them next to ours).
type ttlFields struct {
	OrgID string `json:"org_id"`
	// Status is the sandbox's status (sandbox.StatusOf), next to its state.
	Status sandbox.Status `json:"status"`
	// TTLMs is the lifetime last asked for; null without a TTL.
	TTLMs *int64 `json:"ttl_ms"`
	// TemplateID and TemplateSlug are both the slug (slugs are template
	// IDs here); TemplateVersion numbers template_version_id's build.
	TemplateID      string `json:"template_id"`
	TemplateSlug    string `json:"template_slug"`
	TemplateVersion *int   `json:"template_version"`
	// DestroyedAt and DestroyedReason are set once the sandbox is
	// destroyed (deleting or deleted).
	DestroyedAt     *string `json:"destroyed_at,omitempty"`
	DestroyedReason string  `json:"destroyed_reason,omitempty"`
}

func ttlFieldsOf(sb sandbox.Sandbox) ttlFields {
	f := ttlFields{OrgID: sb.OrgID, Status: sb.Status, TemplateID: sb.Template, TemplateSlug: sb.Template}
	if f.Status == "" {
		// Records that did not pass a read (lifecycle answers) get the
		// status their state and stored activity say.
		f.Status = sandbox.StatusOf(sb, sandbox.StatusInput{Now: time.Now()})
	}
	if sb.TTLMs > 0 {
		f.TTLMs = ptr(sb.TTLMs)
	}
	if sb.TemplateVersion > 0 {
		f.TemplateVersion = ptr(sb.TemplateVersion)
	}
	if !sb.State.Live() {
		at := sb.UpdatedAt
		if sb.DeletedAt != nil {
			at = *sb.DeletedAt
		}
		s := sandbox.FormatTime(at)
		f.DestroyedAt, f.DestroyedReason = &s, sb.Reason
	}
	return f
}
