package daytona

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/compat/compatkit"
	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Daytona's lifecycle defaults (minutes), used when a create names none.
const (
	defaultAutoStop    = 15
	defaultAutoArchive = 7 * minutesPerDay
	// maxAutoArchive is what autoArchiveInterval 0 means (Daytona's
	// maximum, 30 days).
	maxAutoArchive = 30 * minutesPerDay
	// Sizes of a create that names none.
	defaultCPU, defaultMemoryGiB, defaultDiskGiB = 1, 1, 3
)

// createSandbox is Daytona's CreateSandbox body. Fields Platinum cannot
// honour are decoded only to refuse them clearly.
type createSandbox struct {
	Name                string            `json:"name"`
	Snapshot            string            `json:"snapshot"`
	User                string            `json:"user"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	NetworkAllowList    string            `json:"networkAllowList"`
	DomainAllowList     string            `json:"domainAllowList"`
	Target              string            `json:"target"`
	CPU                 *float64          `json:"cpu"`
	GPU                 *int              `json:"gpu"`
	Memory              *float64          `json:"memory"`
	Disk                *int              `json:"disk"`
	AutoStopInterval    *int              `json:"autoStopInterval"`
	AutoArchiveInterval *int              `json:"autoArchiveInterval"`
	AutoDeleteInterval  *int              `json:"autoDeleteInterval"`
	AutoPauseInterval   *int              `json:"autoPauseInterval"`
	Ephemeral           bool              `json:"ephemeral"`
	TTLMinutes          *int              `json:"ttlMinutes"`
	Volumes             []json.RawMessage `json:"volumes"`
	BuildInfo           *struct {
		DockerfileContent string `json:"dockerfileContent"`
	} `json:"buildInfo"`
	Secrets []json.RawMessage `json:"secrets"`
	// Accepted without effect: spot (a sandbox here is never evicted)
	// and otelEndpointOverride (no telemetry export).
	Spot                 bool     `json:"spot"`
	OtelEndpointOverride string   `json:"otelEndpointOverride"`
	OutboundProxyURL     string   `json:"outboundProxyUrl"`
	LinkedSandbox        string   `json:"linkedSandbox"`
	KVM                  bool     `json:"kvm"`
	GPUType              []string `json:"gpuType"`
}

// decodeJSON reads an optional JSON body (the SDK sends bodiless POSTs as
// empty form posts).
func decodeJSON(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return badRequest("read body: %v", err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return badRequest("invalid JSON body: %v", err)
	}
	return nil
}

// unsupported refuses options whose silent loss would surprise the caller.
func (c *createSandbox) unsupported() error {
	const later = "is not supported by Platinum's Daytona surface"
	switch {
	case len(c.Volumes) > 0:
		return badRequest("volumes %s", later)
	case len(c.Secrets) > 0:
		return badRequest("secrets %s; pass values in env or use Platinum's /v1 secrets", later)
	case c.AutoPauseInterval != nil && *c.AutoPauseInterval > 0:
		return badRequest("autoPauseInterval %s; autoStopInterval stops with memory kept", later)
	case c.User != "" && c.User != "root":
		return badRequest("user %q %s: Platinum's templates run as root", c.User, later)
	case c.OutboundProxyURL != "":
		return badRequest("outboundProxyUrl %s; restrict egress with networkAllowList or domainAllowList", later)
	case c.LinkedSandbox != "":
		return badRequest("linkedSandbox %s", later)
	case c.KVM:
		return badRequest("kvm %s (sandboxes are containers, with no /dev/kvm)", later)
	case len(c.GPUType) > 0 && (c.GPU == nil || *c.GPU < 1):
		return badRequest("gpuType needs gpu of at least 1")
	}
	return c.validNetwork()
}

// gpuTypes are Daytona's GPU type names; gpuModel turns one into the
// model name Platinum matches against the host's GPUs (a part of it,
// any case: "RTX-4090" finds "NVIDIA GeForce RTX 4090").
var gpuTypes = []string{"H100", "H200", "B300", "RTX-PRO-6000", "RTX-4090", "RTX-5090", "MI355X"}

func gpuModel(t string) string { return strings.ReplaceAll(t, "-", " ") }

// gpuType is the Daytona name of a model asked for at create ("" when it
// is not one).
func gpuType(model string) string {
	for _, t := range gpuTypes {
		if strings.EqualFold(gpuModel(t), model) {
			return t
		}
	}
	return ""
}

// template resolves a create's snapshot: a template slug, one of the
// org's snapshots (by name or snap_… ID; the sandbox is a clone of it), or
// a one-line Dockerfile "FROM <template>" (the SDK's image string). None
// is the server's default template.
func (h *Handler) template(ctx context.Context, p controlplane.Principal, c *createSandbox) (slug, snapID string, err error) {
	name := c.Snapshot
	if c.BuildInfo != nil {
		df := strings.TrimSpace(c.BuildInfo.DockerfileContent)
		from, ok := strings.CutPrefix(df, "FROM ")
		if !ok || strings.ContainsAny(from, "\n ") {
			return "", "", badRequest("images and Dockerfiles are not built by Platinum: name a template as snapshot (%s)", h.templateList(ctx))
		}
		if _, err := h.cp.GetTemplate(ctx, from); err != nil {
			return "", "", &apiError{Status: http.StatusNotFound, Msg: fmt.Sprintf("image %s is not one of this server's templates (%s); Platinum builds no images", from, h.templateList(ctx))}
		}
		return from, "", nil
	}
	if name == "" {
		ts, err := h.cp.ListTemplates(ctx)
		if err != nil {
			return "", "", err
		}
		for _, t := range ts {
			if t.Default {
				return t.Slug, "", nil
			}
		}
		return "", "", badRequest("snapshot is required: name a template (%s)", h.templateList(ctx))
	}
	if _, err := h.cp.GetTemplate(ctx, name); err == nil {
		return name, "", nil
	}
	s, ok, err := h.orgSnapshotNamed(ctx, p, name)
	if err != nil {
		return "", "", err
	}
	if !ok {
		return "", "", &apiError{Status: http.StatusNotFound, Msg: fmt.Sprintf("Snapshot %s not found; this server has %s, and the organization's own snapshots", name, h.templateList(ctx))}
	}
	if s.State != sandbox.SnapshotReady {
		return "", "", &apiError{Status: http.StatusConflict, Msg: fmt.Sprintf("Snapshot %s is still being taken", name)}
	}
	return "", s.ID, nil
}

func (h *Handler) templateList(ctx context.Context) string {
	return compatkit.TemplateList(ctx, h.cp)
}

// network maps networkBlockAll and the allow lists onto a deny-by-default
// policy; nil when none is set.
func (c *createSandbox) network() *sandbox.NetworkPolicy {
	var allow []string
	for _, list := range []string{c.NetworkAllowList, c.DomainAllowList} {
		for _, v := range strings.Split(list, ",") {
			if v = strings.TrimSpace(v); v != "" {
				allow = append(allow, v)
			}
		}
	}
	if !c.NetworkBlockAll && len(allow) == 0 {
		return nil
	}
	return &sandbox.NetworkPolicy{Egress: "deny", AllowOut: allow}
}

// retention maps Daytona's minute timers onto Platinum's: auto-stop in
// minutes (0 disables), auto-archive rounded up to whole days (0 is the
// maximum, 30 days), auto-delete rounded up to days (negative disables,
// 0 deletes at stop: an ephemeral sandbox).
func retention(stop, archive, del int) (sandbox.Retention, error) {
	if stop < 0 || archive < 0 {
		return sandbox.Retention{}, badRequest("autoStopInterval and autoArchiveInterval must not be negative")
	}
	if archive == 0 {
		archive = maxAutoArchive
	}
	r := sandbox.Retention{Type: sandbox.TypePersistent, AutoStopMinutes: stop, AutoArchiveDays: ceilDays(archive)}
	switch {
	case del == 0:
		r.Type = sandbox.TypeEphemeral
	case del > 0:
		r.AutoDeleteDays = ceilDays(del)
	}
	return r, nil
}

func ceilDays(minutes int) int { return (minutes + minutesPerDay - 1) / minutesPerDay }

func orDefault(v *int, def int) int {
	if v == nil {
		return def
	}
	return *v
}

// create is POST /sandbox. It answers once the sandbox runs (state
// started), so the SDK makes no follow-up call; a sandbox still on its way
// when LifecycleWait runs out is answered as it is (the SDK polls).
func (h *Handler) create(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var req createSandbox
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if err := req.unsupported(); err != nil {
		return err
	}
	ctx := r.Context()
	slug, snapID, err := h.template(ctx, p, &req)
	if err != nil {
		return err
	}
	del := orDefault(req.AutoDeleteInterval, -1)
	if req.Ephemeral {
		del = 0
	}
	ret, err := retention(orDefault(req.AutoStopInterval, defaultAutoStop), orDefault(req.AutoArchiveInterval, defaultAutoArchive), del)
	if err != nil {
		return err
	}
	md := map[string]string{}
	for k, v := range req.Labels {
		if strings.HasPrefix(k, hiddenLabelPrefix) {
			return badRequest("labels starting with %q are reserved", hiddenLabelPrefix)
		}
		md[k] = v
	}
	if req.Public {
		md[labelPublic] = "true"
	}
	if snapID != "" {
		md[labelSnapshot] = req.Snapshot // shown as the DTO's snapshot
	}
	cr := controlplane.CreateRequest{
		Template: slug, FromSnapshot: snapID, Name: req.Name, Env: req.Env, Metadata: md,
		Network: req.network(), Runtime: req.Labels[LabelRuntime],
		Type: ret.Type, AutoStopMinutes: &ret.AutoStopMinutes, AutoArchiveDays: &ret.AutoArchiveDays, AutoDeleteDays: &ret.AutoDeleteDays,
	}
	// Daytona's defaults where the create names no size: 1 vCPU, 1 GiB,
	// 3 GiB of disk; a clone of a snapshot gets the snapshot's.
	cpu, mem, disk := float64(defaultCPU), float64(defaultMemoryGiB), defaultDiskGiB
	if req.CPU != nil {
		cpu = *req.CPU
	}
	if req.Memory != nil {
		mem = *req.Memory
	}
	if req.Disk != nil {
		disk = *req.Disk
	}
	mb := int(mem * 1024)
	cr.CPU, cr.RAMMB, cr.DiskGB = &cpu, &mb, &disk
	if snapID != "" {
		cr.CPU, cr.RAMMB, cr.DiskGB = req.CPU, nil, req.Disk
		if req.Memory != nil {
			cr.RAMMB = &mb
		}
	}
	if req.TTLMinutes != nil {
		if *req.TTLMinutes < 0 {
			return badRequest("ttlMinutes must not be negative")
		}
		cr.TTL = time.Duration(*req.TTLMinutes) * time.Minute // a wall-clock cap: deleted then
	}
	if req.GPU != nil {
		cr.GPUs = *req.GPU
	}
	// gpuType lists the models the caller accepts: the first a host has
	// enough of wins (a refusal names what the host has).
	models := []string{""}
	if len(req.GPUType) > 0 {
		models = models[:0]
		for _, t := range req.GPUType {
			models = append(models, gpuModel(t))
		}
	}
	var sb sandbox.Sandbox
	for _, m := range models {
		cr.GPUModel = m
		var ge *controlplane.GPUsUnavailableError
		if sb, err = h.cp.Create(ctx, p, cr); !errors.As(err, &ge) {
			break
		}
	}
	if err != nil {
		var nf interface{ Field() string }
		if errors.As(err, &nf) && (nf.Field() == "template" || nf.Field() == "from_snapshot") {
			return &apiError{Status: http.StatusNotFound, Msg: fmt.Sprintf("Snapshot %s not found; this server has %s", cmp.Or(slug, req.Snapshot), h.templateList(ctx))}
		}
		return err
	}
	sb, _, err = h.cp.WaitFor(ctx, p, sb.ID, sandbox.StateRunning, h.cfg.LifecycleWait)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.view(r, sb))
	return nil
}

// lookup finds a live sandbox by ID or name (names are unique per org
// among live sandboxes).
func (h *Handler) lookup(ctx context.Context, p controlplane.Principal, idOrName string) (sandbox.Sandbox, error) {
	notFound := fmt.Errorf("Sandbox with ID or name %s not found: %w", idOrName, sandbox.ErrNotFound)
	if sandbox.ValidID(sandbox.PrefixSandbox, idOrName) {
		sb, err := h.cp.Get(ctx, p, idOrName, false)
		if errors.Is(err, sandbox.ErrNotFound) || (err == nil && !sb.State.Live()) {
			return sandbox.Sandbox{}, notFound
		}
		return sb, err
	}
	for offset := 0; ; offset += 200 {
		page, total, err := h.cp.List(ctx, p, controlplane.ListRequest{Limit: 200, Offset: offset, Include: []string{"failed"}})
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		for _, sb := range page {
			if sb.Name == idOrName && sb.State.Live() {
				return sb, nil
			}
		}
		if offset+len(page) >= total || len(page) == 0 {
			return sandbox.Sandbox{}, notFound
		}
	}
}

// lookupIn is lookup for an operation Daytona allows only from state
// want: a sandbox in another state is refused as Daytona refuses it, 409
// while it is on its way somewhere (a state change in progress), else 400
// with refusal, a format that gets the sandbox's Daytona state.
func (h *Handler) lookupIn(ctx context.Context, p controlplane.Principal, idOrName string, want sandbox.State, refusal string) (sandbox.Sandbox, error) {
	sb, err := h.lookup(ctx, p, idOrName)
	if err != nil || sb.State == want {
		return sb, err
	}
	if transitional(sb.State) {
		return sandbox.Sandbox{}, &controlplane.StateError{State: sb.State}
	}
	return sandbox.Sandbox{}, badRequest(refusal, daytonaState(sb.State))
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	sb, err := h.lookup(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.view(r, sb))
	return nil
}

// settle waits until sb reaches target (or failed or deleted), bounded by
// LifecycleWait; the SDK polls for anything left.
func (h *Handler) settle(ctx context.Context, p controlplane.Principal, sb sandbox.Sandbox, target sandbox.State) (sandbox.Sandbox, error) {
	if sb.State == target {
		return sb, nil
	}
	out, _, err := h.cp.WaitFor(ctx, p, sb.ID, target, h.cfg.LifecycleWait)
	if errors.Is(err, sandbox.ErrNotFound) {
		sb.State = sandbox.StateDeleted // an ephemeral sandbox deleted at its stop
		return sb, nil
	}
	return out, err
}

// start is POST /sandbox/{id}/start (and /recover): from stopped,
// archived or error, answered once started with what came back (restore,
// ram_restored). A started sandbox answers as it is; one in a transition
// is 409.
func (h *Handler) start(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	ctx := r.Context()
	sb, err := h.lookup(ctx, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	if strings.HasSuffix(r.URL.Path, "/recover") && sb.State != sandbox.StateFailed {
		return badRequest("Sandbox is not in an error state (%s): nothing to recover", daytonaState(sb.State))
	}
	if transitional(sb.State) {
		return &controlplane.StateError{State: sb.State}
	}
	if sb.State != sandbox.StateRunning {
		if sb, err = h.cp.Start(ctx, p, sb.ID); err != nil {
			return err
		}
		if sb, err = h.settle(ctx, p, sb, sandbox.StateRunning); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, withRestore(h.view(r, sb), sb))
	return nil
}

// stop is POST /sandbox/{id}/stop: only from started (400 otherwise, 409
// during a transition), answered once stopped, or for an ephemeral
// sandbox once destroyed. Memory is kept where the host can (gVisor
// checkpoints; runc freezes within the warm window).
func (h *Handler) stop(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	ctx := r.Context()
	sb, err := h.lookupIn(ctx, p, r.PathValue("id"), sandbox.StateRunning, "Sandbox is not in a stoppable state (%s)")
	if err != nil {
		return err
	}
	if sb, err = h.cp.Stop(ctx, p, sb.ID); err != nil {
		return err
	}
	if sb, err = h.settle(ctx, p, sb, sandbox.StateStopped); err != nil {
		return err
	}
	if sb.Retention.Type == sandbox.TypeEphemeral && (sb.State == sandbox.StateStopped || sb.State == sandbox.StateDeleting) {
		// Daytona never shows an ephemeral sandbox stopped: its stop ends
		// in destroyed, and reads after it are 404. Platinum records the
		// stop and then deletes, so the answer waits for the delete too
		// (a read right after it would otherwise still find the sandbox).
		if sb, err = h.settle(ctx, p, sb, sandbox.StateDeleted); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, h.view(r, sb))
	return nil
}

// archive is POST /sandbox/{id}/archive: only from stopped, answered once
// archived (the SDK re-reads the sandbox without waiting).
func (h *Handler) archive(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	ctx := r.Context()
	sb, err := h.lookupIn(ctx, p, r.PathValue("id"), sandbox.StateStopped, "Sandbox is not stopped (%s)")
	if err != nil {
		return err
	}
	if sb.Retention.Type == sandbox.TypeEphemeral {
		return badRequest("Ephemeral sandboxes cannot be archived")
	}
	if sb, err = h.cp.Archive(ctx, p, sb.ID); err != nil {
		return err
	}
	if sb, err = h.settle(ctx, p, sb, sandbox.StateArchived); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.view(r, sb))
	return nil
}

// delete is DELETE /sandbox/{id}: teardown runs in the background; the
// answer says destroying and later reads are 404. As on Daytona, a
// sandbox in the middle of a state change (starting, stopping, archiving,
// restoring) is 409; one being created may be deleted (Daytona exempts
// pending_build), and one already being deleted answers as it is.
func (h *Handler) delete(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	sb, err := h.lookup(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	if transitional(sb.State) && sb.State != sandbox.StateCreating && sb.State != sandbox.StateDeleting {
		return &controlplane.StateError{State: sb.State}
	}
	if sb, err = h.cp.Delete(r.Context(), p, sb.ID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.view(r, sb))
	return nil
}

// resize is POST /sandbox/{id}/resize {cpu?, memory? (GiB), disk? (GiB)}:
// Platinum's resize, live where it can be (cpu and memory within the
// boot's headroom, disk growth online), else at the next start.
func (h *Handler) resize(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var req struct {
		CPU    *float64 `json:"cpu"`
		Memory *float64 `json:"memory"`
		Disk   *int     `json:"disk"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.CPU == nil && req.Memory == nil && req.Disk == nil {
		return badRequest("resize needs at least one of cpu, memory, disk")
	}
	ctx := r.Context()
	sb, err := h.lookup(ctx, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	if req.Disk != nil && *req.Disk < sb.DiskGB {
		return badRequest("disk cannot shrink (%d GiB now)", sb.DiskGB)
	}
	rr := controlplane.ResizeRequest{CPU: req.CPU, DiskGB: req.Disk}
	if req.Memory != nil {
		mb := int(*req.Memory * 1024)
		rr.RAMMB = &mb
	}
	res, err := h.cp.Resize(ctx, p, sb.ID, rr)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.view(r, res.Sandbox))
	return nil
}

// setLabels is PUT /sandbox/{id}/labels {labels}: the whole map is
// replaced (Platinum's own hidden settings stay).
func (h *Handler) setLabels(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var req struct {
		Labels map[string]string `json:"labels"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.Labels == nil {
		return badRequest("labels is required")
	}
	ctx := r.Context()
	sb, err := h.lookup(ctx, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	md := map[string]string{}
	for k, v := range sb.Metadata {
		if strings.HasPrefix(k, hiddenLabelPrefix) {
			md[k] = v
		}
	}
	for k, v := range req.Labels {
		if strings.HasPrefix(k, hiddenLabelPrefix) {
			return badRequest("labels starting with %q are reserved", hiddenLabelPrefix)
		}
		md[k] = v
	}
	sb, err = h.cp.Update(ctx, p, sb.ID, controlplane.Patch{Metadata: &md})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"labels": h.view(r, sb).Labels})
	return nil
}

type timer int

const (
	timerStop timer = iota
	timerArchive
	timerDelete
)

// setTimer is POST /sandbox/{id}/autostop|autoarchive|autodelete/{interval}.
func (h *Handler) setTimer(which timer) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
		n, err := strconv.Atoi(r.PathValue("interval"))
		if err != nil {
			return badRequest("interval must be an integer number of minutes")
		}
		ctx := r.Context()
		sb, err := h.lookup(ctx, p, r.PathValue("id"))
		if err != nil {
			return err
		}
		d := h.view(r, sb)
		stop, archive, del := d.AutoStopInterval, d.AutoArchiveInterval, d.AutoDeleteInterval
		switch which {
		case timerStop:
			stop = n
		case timerArchive:
			archive = n
		case timerDelete:
			del = n
		}
		ret, err := retention(stop, archive, del)
		if err != nil {
			return err
		}
		if _, err := h.cp.Update(ctx, p, sb.ID, controlplane.Patch{Retention: &ret}); err != nil {
			return err
		}
		w.WriteHeader(http.StatusOK)
		return nil
	}
}

// lastActivity is POST /sandbox/{id}/last-activity: resets the auto-stop
// clock.
func (h *Handler) lastActivity(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	sb, err := h.lookup(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	h.cp.Touch(sb.ID)
	w.WriteHeader(http.StatusOK)
	return nil
}

func (h *Handler) toolboxProxyURL(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	if _, err := h.lookup(r.Context(), p, r.PathValue("id")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"url": toolboxURL(r)})
	return nil
}

// previewURL is GET …/ports/{port}/preview-url ({sandboxId, url, token}:
// send the token as X-Daytona-Preview-Token) and …/signed-preview-url
// (the token rides once in the URL's query, as pt_token, and the preview
// proxy turns it into a cookie). A public sandbox's ports need no token.
func (h *Handler) previewURL(signed bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
		port, err := strconv.Atoi(r.PathValue("port"))
		if err != nil || port < 1 || port > 65535 {
			return badRequest("port must be between 1 and 65535")
		}
		ctx := r.Context()
		sb, err := h.lookup(ctx, p, r.PathValue("id"))
		if err != nil {
			return err
		}
		expires := time.Duration(0)
		if signed {
			secs := 60
			if v := r.URL.Query().Get("expiresInSeconds"); v != "" {
				if secs, err = strconv.Atoi(v); err != nil || secs < 1 || secs > 86400 {
					return badRequest("expiresInSeconds must be between 1 and 86400")
				}
			}
			expires = time.Duration(secs) * time.Second
		}
		var pv controlplane.PreviewURL
		if sb.Metadata[labelPublic] == "true" {
			pv, err = h.cp.SetPreviewPublic(ctx, p, sb.ID, port, true)
		} else {
			pv, err = h.cp.PreviewURL(ctx, p, sb.ID, port, expires)
		}
		if err != nil {
			return err
		}
		u := pv.PathURL
		if signed {
			if pv.Token != "" {
				u += "?pt_token=" + pv.Token
			}
			writeJSON(w, http.StatusOK, map[string]any{"sandboxId": sb.ID, "port": port, "token": pv.Token, "url": u})
			return nil
		}
		writeJSON(w, http.StatusOK, map[string]any{"sandboxId": sb.ID, "url": u, "token": pv.Token})
		return nil
	}
}

// config is GET /config: the SDK reads it lazily (analytics); no
// analytics endpoint here.
func (h *Handler) config(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	writeJSON(w, http.StatusOK, map[string]any{
		"version": "platinum", "proxyToolboxUrl": toolboxURL(r), "defaultSnapshot": "",
		"maxAutoArchiveInterval": maxAutoArchive, "maintananceMode": false, "environment": "platinum",
	})
	return nil
}
