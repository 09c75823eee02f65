package daytona

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Daytona's snapshots are two things here: Platinum's templates (general
// snapshots every org sees, built by ptd itself) and the org's own
// snapshots of its sandboxes (Platinum's snap_…: sandbox.createSnapshot
// takes one, and a create naming it clones it). GET /snapshots lists both;
// a name resolves to a template first, then to the org's newest snapshot
// of that name. fork is Platinum's fork. Building snapshots from images is
// not offered.

// snapshotDTO is Daytona's SnapshotDto.
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
	SandboxClass   string   `json:"sandboxClass"`
	Default        bool     `json:"default,omitempty"`
	// Memory says whether a sandbox snapshot holds the processes' memory
	// (Platinum's; a create from it then resumes them).
	Memory *bool `json:"memory,omitempty"`
}

// templateSnapshotView is a template as a general snapshot. One never
// built shows as pending (the first create builds it).
func templateSnapshotView(t controlplane.Template) snapshotDTO {
	d := snapshotDTO{ID: t.Slug, General: true, Name: t.Slug, ImageName: t.Slug, State: "pending",
		Entrypoint: []string{}, CPU: defaultCPU, Mem: defaultMemoryGiB, Disk: defaultDiskGiB,
		SandboxClass: "container", Default: t.Default}
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

// orgSnapshotView is one of the org's sandbox snapshots: its size is the
// source sandbox's, a create from it gets.
func orgSnapshotView(s sandbox.Snapshot) snapshotDTO {
	name := s.Name
	if name == "" {
		name = s.ID
	}
	src, mem := s.SandboxID, s.Memory
	gb := float64(s.SizeBytes) / (1 << 30)
	d := snapshotDTO{ID: s.ID, OrganizationID: s.OrgID, Name: name, ImageName: s.Source.Template, State: "active",
		Size: &gb, Entrypoint: []string{}, CPU: int(math.Ceil(s.Source.CPU)), Mem: int(math.Ceil(float64(s.Source.RAMMB) / 1024)),
		Disk: s.Source.DiskGB, CreatedAt: isoTime(s.CreatedAt), UpdatedAt: isoTime(s.UpdatedAt), SourceSandbox: &src,
		SandboxClass: "container", Memory: &mem}
	switch s.State {
	case sandbox.SnapshotCreating:
		d.State, d.Size = "snapshotting", nil
	case sandbox.SnapshotFailed:
		d.State, d.ErrorReason = "error", &s.Reason
	}
	return d
}

// orgSnapshots returns the org's sandbox snapshots (not backups), newest
// first, failed ones left out.
func (h *Handler) orgSnapshots(ctx context.Context, p controlplane.Principal) ([]sandbox.Snapshot, error) {
	all, err := h.cp.ListSnapshots(ctx, p, "", sandbox.KindSnapshot)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(s sandbox.Snapshot) bool { return s.State == sandbox.SnapshotFailed }), nil
}

// orgSnapshotNamed returns the org's newest snapshot called name (or with
// that snap_… ID), ok false when there is none.
func (h *Handler) orgSnapshotNamed(ctx context.Context, p controlplane.Principal, name string) (sandbox.Snapshot, bool, error) {
	if strings.HasPrefix(name, sandbox.PrefixSnapshot) {
		s, err := h.cp.GetSnapshot(ctx, p, name)
		if errors.Is(err, sandbox.ErrNotFound) || err == nil && s.Kind != sandbox.KindSnapshot {
			return sandbox.Snapshot{}, false, nil
		}
		return s, err == nil, err
	}
	all, err := h.orgSnapshots(ctx, p)
	if err != nil {
		return sandbox.Snapshot{}, false, err
	}
	for _, s := range all { // newest first
		if s.Name == name {
			return s, true, nil
		}
	}
	return sandbox.Snapshot{}, false, nil
}

// listSnapshots is GET /snapshots?page&limit&name&sourceSandboxId&sort&order:
// {items, total, page, totalPages}. Templates come first, then the org's
// snapshots newest first, unless sort (name, state, lastUsedAt,
// createdAt) and order (asc, desc) say otherwise. name matches a part of
// the name, case-insensitively; sourceSandboxId keeps that sandbox's
// snapshots only.
func (h *Handler) listSnapshots(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	q := r.URL.Query()
	page, limit := 1, 100
	for _, f := range []struct {
		name string
		dst  *int
	}{{"page", &page}, {"limit", &limit}} {
		if v := q.Get(f.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return badRequest("%s must be a positive integer", f.name)
			}
			*f.dst = n
		}
	}
	sortBy, order := q.Get("sort"), q.Get("order")
	switch sortBy {
	case "", "name", "state", "lastUsedAt", "createdAt":
	default:
		return badRequest("sort must be name, state, lastUsedAt or createdAt")
	}
	switch order {
	case "", "asc", "desc":
	default:
		return badRequest("order must be asc or desc")
	}
	ctx := r.Context()
	all := []snapshotDTO{}
	source := q.Get("sourceSandboxId")
	if source == "" {
		ts, err := h.cp.ListTemplates(ctx)
		if err != nil {
			return err
		}
		for _, t := range ts {
			all = append(all, templateSnapshotView(t))
		}
	}
	snaps, err := h.orgSnapshots(ctx, p)
	if err != nil {
		return err
	}
	for _, s := range snaps {
		if source == "" || s.SandboxID == source {
			all = append(all, orgSnapshotView(s))
		}
	}
	if name := strings.ToLower(q.Get("name")); name != "" {
		all = slices.DeleteFunc(all, func(d snapshotDTO) bool { return !strings.Contains(strings.ToLower(d.Name), name) })
	}
	if sortBy != "" {
		key := func(d snapshotDTO) string {
			switch sortBy {
			case "name":
				return d.Name
			case "state":
				return d.State
			}
			return d.CreatedAt // lastUsedAt: never recorded, so creation
		}
		slices.SortStableFunc(all, func(a, b snapshotDTO) int {
			if order == "desc" {
				return cmp.Compare(key(b), key(a))
			}
			return cmp.Compare(key(a), key(b))
		})
	}
	from := min((page-1)*limit, len(all))
	to := min(from+limit, len(all))
	writeJSON(w, http.StatusOK, map[string]any{"items": all[from:to], "total": len(all), "page": page,
		"totalPages": (len(all) + limit - 1) / limit})
	return nil
}

// getSnapshot is GET /snapshots/{idOrName}: a template, or one of the
// org's snapshots by ID or name.
func (h *Handler) getSnapshot(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	d, err := h.snapshotDTO(r.Context(), p, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (h *Handler) snapshotDTO(ctx context.Context, p controlplane.Principal, name string) (snapshotDTO, error) {
	if t, err := h.cp.GetTemplate(ctx, name); err == nil {
		return templateSnapshotView(t), nil
	}
	s, ok, err := h.orgSnapshotNamed(ctx, p, name)
	if err != nil {
		return snapshotDTO{}, err
	}
	if !ok {
		return snapshotDTO{}, fmt.Errorf("Snapshot %s not found: %w", name, sandbox.ErrNotFound)
	}
	return orgSnapshotView(s), nil
}

// activateSnapshot is POST /snapshots/{id}/activate: snapshots here are
// always active, so it answers the snapshot as it is.
func (h *Handler) activateSnapshot(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return h.getSnapshot(w, r, p)
}

// deleteSnapshot is DELETE /snapshots/{id}: one of the org's snapshots
// (its files go; sandboxes made from it keep running). Templates are the
// server's: 403.
func (h *Handler) deleteSnapshot(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	id := r.PathValue("name")
	if _, err := h.cp.GetTemplate(r.Context(), id); err == nil {
		return &apiError{Status: http.StatusForbidden, Msg: fmt.Sprintf("Snapshot %s is a general snapshot (one of the server's templates) and cannot be deleted", id)}
	}
	s, ok, err := h.orgSnapshotNamed(r.Context(), p, id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("Snapshot %s not found: %w", id, sandbox.ErrNotFound)
	}
	if err := h.cp.DeleteSnapshot(r.Context(), p, s.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// createSnapshotFromImage is POST /snapshots (daytona.snapshot.create):
// refused, since ptd builds no images.
func (h *Handler) createSnapshotFromImage(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return badRequest("snapshots are not built from images here: take one of a sandbox (sandbox.createSnapshot) or use a template (%s)", h.templateList(r.Context()))
}

// sandboxSnapshot is POST /sandbox/{id}/snapshot {name, includeMemory?}
// (sandbox.createSnapshot): a Platinum snapshot of a started or stopped
// sandbox, of its disk, and of its memory too when includeMemory is true
// (where the runtime class can: gVisor, runc with CRIU). It answers once
// the snapshot is ready, with the sandbox (no snapshotting state to wait
// out). A name already used by a template or another of the org's
// snapshots is 409, as on Daytona.
func (h *Handler) sandboxSnapshot(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var req struct {
		Name          string `json:"name"`
		IncludeMemory bool   `json:"includeMemory"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		return badRequest("name is required")
	}
	ctx := r.Context()
	sb, err := h.lookup(ctx, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	if _, err := h.cp.GetTemplate(ctx, req.Name); err == nil {
		return &apiError{Status: http.StatusConflict, Msg: fmt.Sprintf("Snapshot with name %s already exists (a template)", req.Name)}
	}
	if _, ok, err := h.orgSnapshotNamed(ctx, p, req.Name); err != nil {
		return err
	} else if ok {
		return &apiError{Status: http.StatusConflict, Msg: fmt.Sprintf("Snapshot with name %s already exists", req.Name)}
	}
	if _, err := h.cp.Snapshot(ctx, p, sb.ID, controlplane.SnapshotRequest{Name: req.Name, Memory: &req.IncludeMemory}); err != nil {
		return err
	}
	if sb, err = h.cp.Get(ctx, p, sb.ID, false); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.view(r, sb))
	return nil
}

// fork is POST /sandbox/{id}/fork {name?} (sandbox.fork): Platinum's fork
// of a started sandbox, one copy, answered once it runs. The copy starts
// from the source's memory where its class can checkpoint (restore and
// ram_restored say what came back), else from a copy of its disk; it
// keeps the source's env, labels, timers and network policy, and is its
// child, so the source cannot be deleted while it lives (400, as
// Daytona's "active fork children").
func (h *Handler) fork(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var req struct {
		Name string `json:"name"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	ctx := r.Context()
	src, err := h.lookupIn(ctx, p, r.PathValue("id"), sandbox.StateRunning, "Sandbox is not started (%s): only a started sandbox can be forked")
	if err != nil {
		return err
	}
	res, err := h.cp.Fork(ctx, p, src.ID, controlplane.ForkRequest{Count: 1, Name: req.Name})
	if err != nil {
		return err
	}
	sb, _, err := h.cp.WaitFor(ctx, p, res.Sandboxes[0].ID, sandbox.StateRunning, h.cfg.LifecycleWait)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, withRestore(h.view(r, sb), sb))
	return nil
}
