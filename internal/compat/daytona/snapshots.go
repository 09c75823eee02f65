package daytona

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Daytona's snapshots are Platinum's templates: GET /snapshots lists them
// and a create's snapshot names one. Building snapshots from images is not
// offered (templates are built by ptd itself).

// snapshotDTO is Daytona's SnapshotDto for one template.
type snapshotDTO struct {
	ID             string   `json:"id"`
	OrganizationID string   `json:"organizationId,omitempty"`
	General        bool     `json:"general"`
	Name           string   `json:"name"`
	ImageName      string   `json:"imageName"`
	State          string   `json:"state"`
	Size           *float64 `json:"size"`
	Entrypoint     []string `json:"entrypoint"`
	CPU            int      `json:"cpu"`
	GPU            int      `json:"gpu"`
	Mem            int      `json:"mem"`
	Disk           int      `json:"disk"`
	ErrorReason    *string  `json:"errorReason"`
	CreatedAt      string   `json:"createdAt"`
	UpdatedAt      string   `json:"updatedAt"`
	LastUsedAt     *string  `json:"lastUsedAt"`
	SourceSandbox  *string  `json:"sourceSandboxId"`
	Default        bool     `json:"default,omitempty"`
}

func snapshotView(t controlplane.Template) snapshotDTO {
	d := snapshotDTO{ID: t.Slug, General: true, Name: t.Slug, ImageName: t.Slug, State: "pending",
		Entrypoint: []string{}, CPU: defaultCPU, Mem: defaultMemoryGiB, Disk: defaultDiskGiB, Default: t.Default}
	if v := t.Version; v != nil {
		d.CreatedAt, d.UpdatedAt = isoTime(v.CreatedAt), isoTime(v.UpdatedAt)
		switch v.Status {
		case store.TemplateReady:
			d.State = "active"
			gb := float64(v.SizeBytes) / (1 << 30)
			d.Size = &gb
		case store.TemplateFailed:
			d.State = "error"
			d.ErrorReason = &v.Error
		default:
			d.State = "building"
		}
	}
	return d
}

// listSnapshots is GET /snapshots?page&limit: {items, total, page,
// totalPages}. A template never built shows as pending (the first create
// builds it).
func (h *Handler) listSnapshots(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	ts, err := h.cp.ListTemplates(r.Context())
	if err != nil {
		return err
	}
	page, limit := 1, 100
	for _, f := range []struct {
		name string
		dst  *int
	}{{"page", &page}, {"limit", &limit}} {
		if v := r.URL.Query().Get(f.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return badRequest("%s must be a positive integer", f.name)
			}
			*f.dst = n
		}
	}
	name := r.URL.Query().Get("name")
	all := []snapshotDTO{}
	for _, t := range ts {
		if name == "" || t.Slug == name {
			all = append(all, snapshotView(t))
		}
	}
	from := min((page-1)*limit, len(all))
	to := min(from+limit, len(all))
	writeJSON(w, http.StatusOK, map[string]any{"items": all[from:to], "total": len(all), "page": page,
		"totalPages": (len(all) + limit - 1) / limit})
	return nil
}

func (h *Handler) getSnapshot(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	t, err := h.cp.GetTemplate(r.Context(), r.PathValue("name"))
	if err != nil {
		return fmt.Errorf("Snapshot %s not found: %w", r.PathValue("name"), sandbox.ErrNotFound)
	}
	writeJSON(w, http.StatusOK, snapshotView(t))
	return nil
}
