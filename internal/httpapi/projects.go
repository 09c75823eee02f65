package httpapi

import (
	"net/http"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

type projectView struct {
	ID        string `json:"id"`
	OrgID     string `json:"org_id"`
	Name      string `json:"name"`
	Default   bool   `json:"default"`
	CreatedAt string `json:"created_at"`
}

func viewProject(p store.Project) projectView {
	return projectView{ID: p.ID, OrgID: p.OrgID, Name: p.Name, Default: p.Default, CreatedAt: sandbox.FormatTime(p.CreatedAt)}
}

func (a *API) createProject(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b struct {
		Name string `json:"name"`
	}
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	return respond(w, http.StatusCreated, viewProject)(a.tn.CreateProject(r.Context(), p, b.Name))
}

func (a *API) listProjects(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respondRows(w, "rows", viewProject)(a.tn.ListProjects(r.Context(), p))
}

func (a *API) getProject(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respond(w, http.StatusOK, viewProject)(a.tn.GetProject(r.Context(), p, r.PathValue("id")))
}

// createToken is POST /v1/tokens {role?, project_id?}: a new token of the
// caller's org, shown once.
func (a *API) createToken(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b struct {
		Role      string `json:"role"`
		ProjectID string `json:"project_id"`
	}
	if err := decodeJSON(r, &b, true); err != nil {
		return err
	}
	t, secret, err := a.tn.CreateToken(r.Context(), p, tenancy.TokenRequest{Role: store.Role(b.Role), ProjectID: b.ProjectID})
	if err != nil {
		return err
	}
	var project *string
	if t.ProjectID != "" {
		project = &t.ProjectID
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"id": t.ID, "org_id": t.OrgID, "role": t.Role, "project_id": project,
		"created_at": sandbox.FormatTime(t.CreatedAt), "token": secret,
	})
	return nil
}

func viewOrgQuota(q tenancy.OrgQuotaView) map[string]any {
	return map[string]any{
		"org_id": q.OrgID,
		"limits": map[string]any{"max_sandboxes": q.Limits.MaxSandboxes, "max_cpu": q.Limits.MaxCPU, "max_ram_mb": q.Limits.MaxRAMMB},
		"overrides": map[string]any{"max_sandboxes": q.Limits.Overrides.MaxSandboxes, "max_cpu": q.Limits.Overrides.MaxCPU,
			"max_ram_mb": q.Limits.Overrides.MaxRAMMB},
		"usage": map[string]any{"sandboxes": q.Usage.Sandboxes, "cpu": q.Usage.CPU, "ram_mb": q.Usage.RAMMB},
	}
}

func (a *API) getOrgQuota(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respond(w, http.StatusOK, viewOrgQuota)(a.tn.OrgQuota(r.Context(), p, r.PathValue("id")))
}

// setOrgQuota is PUT /v1/orgs/{id}/quotas {max_sandboxes?, max_cpu?,
// max_ram_mb?}: it replaces the org's overrides (absent or null: the
// server default; 0: no limit). Platform admins only.
func (a *API) setOrgQuota(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b store.OrgQuotas
	if err := decodeJSON(r, &b, true); err != nil {
		return err
	}
	return respond(w, http.StatusOK, viewOrgQuota)(a.tn.SetOrgQuota(r.Context(), p, r.PathValue("id"), b))
}
