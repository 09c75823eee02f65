package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/compat/compatkit"
	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Default TTLs when a create names none: E2B's v1 API defaults to 15 s,
// v2 to 300 s; connect without a timeout extends to 300 s.
const (
	defaultTimeoutV1      = 15
	defaultTimeoutV2      = 300
	defaultConnectTimeout = 300
	// maxTimeout caps any TTL E2B callers set: E2B's own cap is 24 h on
	// its largest tier; Platinum allows 30 days.
	maxTimeout = 30 * 24 * 3600
)

// newSandbox is E2B's NewSandbox (v1) and NewSandboxV2 body. Fields
// Platinum cannot honour yet are decoded only to refuse them clearly.
type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	AutoPause           *bool             `json:"autoPause"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory"`
	AutoResume          *autoResume       `json:"autoResume"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *networkConfig    `json:"network"`
	MCP                 json.RawMessage   `json:"mcp"`
	IAM                 json.RawMessage   `json:"iam"`
	VolumeMounts        []json.RawMessage `json:"volumeMounts"`
	Secure              *bool             `json:"secure"`
}

type autoResume struct {
	Enabled bool `json:"enabled"`
}

// networkConfig is E2B's SandboxNetworkConfig.
type networkConfig struct {
	AllowPublicTraffic *bool                      `json:"allowPublicTraffic"`
	AllowOut           []string                   `json:"allowOut"`
	DenyOut            []string                   `json:"denyOut"`
	EgressProxy        json.RawMessage            `json:"egressProxy"`
	MaskRequestHost    *string                    `json:"maskRequestHost"`
	HTTPSPorts         []int                      `json:"httpsPorts"`
	Rules              map[string]json.RawMessage `json:"rules"`
}

func isNull(m json.RawMessage) bool {
	s := strings.TrimSpace(string(m))
	return s == "" || s == "null"
}

// unsupported refuses options whose silent loss would surprise the caller
// (a network restriction that is not enforced is worse than an error).
func (n *newSandbox) unsupported() error {
	const later = "is not supported by Platinum's E2B surface yet"
	switch {
	case n.AutoPauseMemory != nil && !*n.AutoPauseMemory:
		return badRequest("autoPauseMemory: false %s; pause keeps memory where the host can", later)
	case len(n.VolumeMounts) > 0:
		return badRequest("volumeMounts %s", later)
	case !isNull(n.MCP):
		return badRequest("mcp %s", later)
	case !isNull(n.IAM):
		return badRequest("iam %s", later)
	}
	if nw := n.Network; nw != nil {
		switch {
		case len(nw.Rules) > 0 || !isNull(nw.EgressProxy):
			// allowOut and denyOut map onto the network policy
			// (network.go); per-host rules and an egress proxy do not.
			return badRequest("network egress rules and egressProxy %s", later)
		case nw.AllowPublicTraffic != nil && !*nw.AllowPublicTraffic:
			return badRequest("network.allowPublicTraffic: false %s", later)
		case nw.MaskRequestHost != nil || len(nw.HTTPSPorts) > 0:
			return badRequest("network.maskRequestHost and network.httpsPorts %s", later)
		}
	}
	return nil
}

// timeout is a request's timeout field in seconds (def when absent) as a
// duration, refused outside 0..maxTimeout.
func timeout(seconds *int64, def int64) (time.Duration, error) {
	if seconds == nil {
		seconds = &def
	}
	if *seconds < 0 || *seconds > maxTimeout {
		return 0, badRequest("timeout must be between 0 and %d seconds", maxTimeout)
	}
	return time.Duration(*seconds) * time.Second, nil
}

// create is POST /sandboxes (v1) and POST /v2/sandboxes. It answers 201
// only once the sandbox's agent accepts RPCs: the SDK's Sandbox.create
// returns on that answer and uses the sandbox at once. If the wait runs
// out it answers a retryable 503 sandbox_not_ready and deletes the sandbox
// it made (docs/compatibility.md), so a failed create leaves nothing behind.
func (h *Handler) create(apiVersion int) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
		var req newSandbox
		if err := decodeJSON(r, &req, false); err != nil {
			return err
		}
		if req.TemplateID == "" {
			return badRequest("templateID is required (e.g. \"base\", \"pt-base\" or \"busybox\")")
		}
		if err := req.unsupported(); err != nil {
			return err
		}
		def := int64(defaultTimeoutV2)
		if apiVersion == 1 {
			def = defaultTimeoutV1
		}
		ttl, err := timeout(req.Timeout, def)
		if err != nil {
			return err
		}
		if ttl == 0 {
			return badRequest("timeout must be at least 1 second")
		}
		action := sandbox.ExpireDelete
		if req.AutoPause != nil && *req.AutoPause {
			action = sandbox.ExpireStop
		}
		ctx := r.Context()
		// E2B snapshots are templates: a snapshot's ID or name as
		// templateID clones it.
		snapID, err := h.snapshotTemplate(ctx, p, req.TemplateID)
		if err != nil {
			return err
		}
		var slug, versionID string
		if snapID == "" {
			if slug, versionID, err = h.resolveTemplate(ctx, req.TemplateID); err != nil {
				return err
			}
		}
		noIdleStop := 0
		start := time.Now()
		sb, err := h.cp.Create(ctx, p, controlplane.CreateRequest{
			Template: slug, TemplateVersionID: versionID, FromSnapshot: snapID, Env: req.EnvVars, Metadata: req.Metadata,
			Network: req.networkPolicy(),
			// E2B's timeout is the only bound on a running sandbox's
			// life: no idle auto-stop behind the caller's back.
			AutoStopMinutes: &noIdleStop,
			// The TTL is in the record from the start, so a crash of ptd
			// before the answer cannot leave an immortal sandbox. TTLs
			// do not fire while a sandbox is being created.
			TTL: ttl,
			// E2B resumes a paused sandbox on traffic only when asked.
			NoAutoResume: req.AutoResume == nil || !req.AutoResume.Enabled,
		})
		if err != nil {
			var nf interface{ Field() string }
			if errors.As(err, &nf) && nf.Field() == "template" {
				return &apiError{Status: http.StatusNotFound, Msg: fmt.Sprintf(
					"template '%s' not found; this server has %s (\"base\" is pt-base)", req.TemplateID, h.templateList(ctx))}
			}
			return err
		}
		sb, err = h.ready(ctx, p, sb, ttl, action, start)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, h.sandboxView(sb, false))
		return nil
	}
}

// ready waits until a sandbox this handler just made runs, then starts its
// E2B timeout. A sandbox that does not get there in time is deleted, so a
// failed create or fork leaves nothing behind.
func (h *Handler) ready(ctx context.Context, p controlplane.Principal, sb sandbox.Sandbox, timeout time.Duration, action sandbox.ExpiryAction, start time.Time) (sandbox.Sandbox, error) {
	fail := func(err error) (sandbox.Sandbox, error) {
		dctx, cancel := background(ctx)
		defer cancel()
		if _, derr := h.cp.Delete(dctx, p, sb.ID); derr != nil && !errors.Is(derr, sandbox.ErrNotFound) {
			h.log.Error("e2b: delete after failure", "sandbox", sb.ID, "err", derr)
		}
		return sandbox.Sandbox{}, err
	}
	sb, ok, err := h.cp.WaitFor(ctx, p, sb.ID, sandbox.StateRunning, h.cfg.CreateWait)
	if err != nil {
		return fail(err)
	}
	if !ok {
		return fail(notReady(sb, "create"))
	}
	// The TTL counts from when the sandbox is ready: rewrite it when
	// getting ready took long enough to matter (a template's first build),
	// or when it must pause rather than kill. A fast create keeps the one
	// it was made with (at most a second early) and saves a store write.
	if action != sandbox.ExpireDelete || time.Since(start) > time.Second {
		if sb, err = h.cp.SetExpiry(ctx, p, sb.ID, time.Now().Add(timeout), action); err != nil {
			return fail(err)
		}
	}
	return sb, nil
}

// resolveTemplate maps an E2B template ID onto a Platinum slug: aliases
// ("base"), our slugs as they are, and our version IDs (tplv_…), which pin
// that immutable version (the create refuses one that is not ready).
func (h *Handler) resolveTemplate(ctx context.Context, id string) (slug, versionID string, err error) {
	if !strings.HasPrefix(id, sandbox.PrefixTemplateVersion) {
		return templateSlug(id), "", nil
	}
	slug, _, err = h.cp.TemplateVersionSlug(ctx, id)
	if errors.Is(err, sandbox.ErrNotFound) {
		return "", "", &apiError{Status: http.StatusNotFound, Msg: fmt.Sprintf("template '%s' not found", id)}
	}
	if err != nil {
		return "", "", err
	}
	return slug, id, nil
}

// notReady is the answer when a wait for running ended elsewhere: failed
// sandboxes are a server-side failure with the reason; anything else ran
// out of time and is worth retrying.
func notReady(sb sandbox.Sandbox, op string) error {
	if sb.State == sandbox.StateFailed {
		return &apiError{Status: http.StatusInternalServerError, Code: "sandbox_create_failed",
			Msg: fmt.Sprintf("%s: sandbox %s failed: %s", op, sb.ID, sb.Reason)}
	}
	return &apiError{Status: http.StatusServiceUnavailable, Code: "sandbox_not_ready", RetryAfter: 1,
		Msg: fmt.Sprintf("%s: sandbox %s is %s, not running yet; retry", op, sb.ID, sb.State)}
}

func (h *Handler) templateList(ctx context.Context) string {
	return compatkit.TemplateList(ctx, h.cp)
}

// visible returns the sandbox if E2B callers can see it (running or
// paused), else a not-found error.
func (h *Handler) visible(ctx context.Context, p controlplane.Principal, id string) (sandbox.Sandbox, string, error) {
	sb, err := h.cp.Get(ctx, p, id, false)
	if err != nil {
		return sandbox.Sandbox{}, "", err
	}
	state, ok := e2bState(sb.State)
	if !ok {
		return sandbox.Sandbox{}, "", fmt.Errorf("sandbox %q is %s: %w", id, sb.State, sandbox.ErrNotFound)
	}
	return sb, state, nil
}

// get is GET /sandboxes/:id (SandboxDetail).
func (h *Handler) get(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	sb, state, err := h.visible(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.detailView(sb, state, true))
	return nil
}

// kill is DELETE /sandboxes/:id: 204, or 404 when it is unknown or
// already being deleted (the SDK's kill then returns false).
func (h *Handler) kill(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	id := r.PathValue("id")
	sb, err := h.cp.Get(r.Context(), p, id, false)
	if err != nil {
		return err
	}
	if !sb.State.Live() {
		return fmt.Errorf("sandbox %q is being deleted: %w", id, sandbox.ErrNotFound)
	}
	if _, err := h.cp.Delete(r.Context(), p, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// action returns what the sandbox's TTL does when it runs out. The
// control plane clears the action when a stop-at-expiry fires, leaving the
// stop reason ttl_expired; such a sandbox was made with autoPause and
// keeps it after a resume. Killing is E2B's default.
func action(sb sandbox.Sandbox) sandbox.ExpiryAction {
	switch {
	case sb.ExpiryAction != "":
		return sb.ExpiryAction
	case sb.Reason == "ttl_expired":
		return sandbox.ExpireStop
	}
	return sandbox.ExpireDelete
}

// hasTTL reports whether the sandbox lives under a TTL (every E2B-made
// one does). A sandbox made through /v1 without one keeps having none:
// connecting to it through E2B must not schedule its deletion.
func hasTTL(sb sandbox.Sandbox) bool {
	return sb.ExpiresAt != nil || sb.ExpiryAction != "" || sb.Reason == "ttl_expired"
}

// setTimeout is POST /sandboxes/:id/timeout: the TTL becomes now+timeout,
// shorter or longer than before.
func (h *Handler) setTimeout(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var req struct {
		Timeout *int64 `json:"timeout"`
	}
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	if req.Timeout == nil {
		return badRequest("timeout (seconds) is required")
	}
	d, err := timeout(req.Timeout, 0)
	if err != nil {
		return err
	}
	return h.changeVisible(w, r, p, func(ctx context.Context, sb sandbox.Sandbox) error {
		_, err := h.cp.SetExpiry(ctx, p, sb.ID, time.Now().Add(d), action(sb))
		return err
	})
}

// refresh is the old SDKs' POST /sandboxes/:id/refreshes: keep the
// sandbox alive for duration more seconds (at most an hour).
func (h *Handler) refresh(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var req struct {
		Duration *int64 `json:"duration"`
	}
	if err := decodeJSON(r, &req, true); err != nil {
		return err
	}
	seconds := int64(defaultTimeoutV1)
	if req.Duration != nil {
		seconds = *req.Duration
	}
	if seconds < 0 || seconds > 3600 {
		return badRequest("duration must be between 0 and 3600 seconds")
	}
	return h.changeVisible(w, r, p, func(ctx context.Context, sb sandbox.Sandbox) error {
		return h.extend(ctx, p, sb, time.Duration(seconds)*time.Second)
	})
}

// changeVisible is the end of the routes that change a sandbox and answer
// nothing: change runs on the sandbox the path names if E2B callers can
// see it (else 404, as visible says), and success is 204.
func (h *Handler) changeVisible(w http.ResponseWriter, r *http.Request, p controlplane.Principal, change func(ctx context.Context, sb sandbox.Sandbox) error) error {
	sb, _, err := h.visible(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := change(r.Context(), sb); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// extend makes the sandbox live at least d more, never shortening its TTL.
func (h *Handler) extend(ctx context.Context, p controlplane.Principal, sb sandbox.Sandbox, d time.Duration) error {
	end := time.Now().Add(d)
	if !hasTTL(sb) || (sb.ExpiresAt != nil && !sb.ExpiresAt.Before(end)) {
		return nil
	}
	_, err := h.cp.SetExpiry(ctx, p, sb.ID, end, action(sb))
	return err
}

// pause is POST /sandboxes/:id/pause: our stop, which keeps memory where
// the host can (memory: false stops disk-only). 409 when already paused
// (the SDK returns false).
func (h *Handler) pause(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var req struct {
		Memory *bool `json:"memory"`
	}
	if err := decodeJSON(r, &req, true); err != nil {
		return err
	}
	ctx := r.Context()
	sb, state, err := h.visible(ctx, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	if state == statePaused {
		return &apiError{Status: http.StatusConflict, Msg: fmt.Sprintf("sandbox %s is already paused", sb.ID)}
	}
	// E2B's clock does not run while paused (paused sandboxes are kept
	// until killed): park the TTL at "never", keeping its action for the
	// resume, before stopping, so it cannot fire meanwhile.
	if hasTTL(sb) {
		if _, err := h.cp.SetExpiry(ctx, p, sb.ID, noExpiry, action(sb)); err != nil {
			return err
		}
	}
	stop := h.cp.Stop
	if req.Memory != nil && !*req.Memory {
		stop = h.cp.StopDiskOnly // keepMemory: false
	}
	if _, err := stop(ctx, p, sb.ID); err != nil {
		if hasTTL(sb) && sb.ExpiresAt != nil {
			if _, rerr := h.cp.SetExpiry(ctx, p, sb.ID, *sb.ExpiresAt, action(sb)); rerr != nil {
				h.log.Warn("e2b pause: restore expiry", "sandbox", sb.ID, "err", rerr)
			}
		}
		return err
	}
	sb, ok, err := h.cp.WaitFor(ctx, p, sb.ID, sandbox.StateStopped, h.cfg.LifecycleWait)
	if err != nil {
		return err
	}
	if !ok {
		return &apiError{Status: http.StatusServiceUnavailable, RetryAfter: 5,
			Msg: fmt.Sprintf("pause: sandbox %s is %s, not paused yet; retry", sb.ID, sb.State)}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// connectRequest is ConnectSandbox (v1: timeout required) and
// ConnectSandboxV2 (both optional), and the old ResumedSandbox.
type connectRequest struct {
	Timeout   *int64 `json:"timeout"`
	Memory    *bool  `json:"memory"`
	AutoPause *bool  `json:"autoPause"`
}

// connect is POST /sandboxes/:id/connect (v1) and /v2/…/connect: a
// running sandbox answers 200 and its TTL is extended to at least
// now+timeout; a paused one is started (201) with what the start restored
// in restore/ramRestored, and its TTL becomes now+timeout.
func (h *Handler) connect(apiVersion int) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
		var req connectRequest
		if err := decodeJSON(r, &req, apiVersion == 2); err != nil {
			return err
		}
		if apiVersion == 1 && req.Timeout == nil {
			return badRequest("timeout (seconds) is required")
		}
		d, err := timeout(req.Timeout, defaultConnectTimeout)
		if err != nil {
			return err
		}
		ctx := r.Context()
		sb, state, err := h.visible(ctx, p, r.PathValue("id"))
		if err != nil {
			return err
		}
		if state == stateRunning {
			if err := h.extend(ctx, p, sb, d); err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, h.sandboxView(sb, false))
			return nil
		}
		if req.Memory != nil && !*req.Memory {
			return badRequest("memory: false (onResume 'reboot') is not supported yet; a resume restores memory where the host saved it")
		}
		sb, err = h.resumeSandbox(ctx, p, sb, d, action(sb))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, h.sandboxView(sb, true))
		return nil
	}
}

// resume is the old SDKs' POST /sandboxes/:id/resume: 201, or 409 when
// the sandbox already runs.
func (h *Handler) resume(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var req connectRequest
	if err := decodeJSON(r, &req, true); err != nil {
		return err
	}
	d, err := timeout(req.Timeout, defaultTimeoutV1)
	if err != nil {
		return err
	}
	ctx := r.Context()
	sb, state, err := h.visible(ctx, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	if state == stateRunning {
		return &apiError{Status: http.StatusConflict, Msg: fmt.Sprintf("sandbox %s is already running", sb.ID)}
	}
	act := action(sb)
	if req.AutoPause != nil {
		act = sandbox.ExpireDelete
		if *req.AutoPause {
			act = sandbox.ExpireStop
		}
	}
	sb, err = h.resumeSandbox(ctx, p, sb, d, act)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, h.sandboxView(sb, true))
	return nil
}

// resumeSandbox starts a paused sandbox, waits until its agent answers,
// and sets its TTL to now+d (pause and resume reset E2B's clock) unless
// it never had one.
func (h *Handler) resumeSandbox(ctx context.Context, p controlplane.Principal, sb sandbox.Sandbox, d time.Duration, act sandbox.ExpiryAction) (sandbox.Sandbox, error) {
	hadTTL := hasTTL(sb)
	deadline := time.Now().Add(h.cfg.LifecycleWait)
	if sb.State == sandbox.StateStopping {
		// A pause still in flight: let it finish, then start.
		var err error
		if sb, _, err = h.cp.WaitFor(ctx, p, sb.ID, sandbox.StateStopped, h.cfg.LifecycleWait); err != nil {
			return sandbox.Sandbox{}, err
		}
	}
	if _, err := h.cp.Start(ctx, p, sb.ID); err != nil {
		return sandbox.Sandbox{}, err
	}
	sb, ok, err := h.cp.WaitFor(ctx, p, sb.ID, sandbox.StateRunning, max(time.Until(deadline), time.Second))
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if !ok {
		return sandbox.Sandbox{}, notReady(sb, "resume")
	}
	if !hadTTL {
		return sb, nil
	}
	return h.cp.SetExpiry(ctx, p, sb.ID, time.Now().Add(d), act)
}

// metrics is GET /sandboxes/:id/metrics: one current sample (Platinum
// keeps no metric history yet), or none when the sandbox is paused or the
// sample lies outside [start, end].
func (h *Handler) metrics(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	q := r.URL.Query()
	var bounds [2]int64
	for i, name := range []string{"start", "end"} {
		if v := q.Get(name); v != "" {
			if _, err := fmt.Sscan(v, &bounds[i]); err != nil {
				return badRequest("%s must be a unix time in seconds", name)
			}
		}
	}
	sb, state, err := h.visible(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	out := []metricView{}
	if state == stateRunning {
		m, err := h.sandboxMetrics(r.Context(), p, sb)
		if err != nil {
			return err
		}
		if (bounds[0] == 0 || m.TimestampUnix >= bounds[0]) && (bounds[1] == 0 || m.TimestampUnix <= bounds[1]) {
			out = append(out, m)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// batchMetrics is GET /sandboxes/metrics?sandbox_ids=a,b: the latest
// sample of each running sandbox named.
func (h *Handler) batchMetrics(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	ids, err := metricsIDs(r.URL.Query())
	if err != nil {
		return err
	}
	out := map[string]metricView{}
	for _, id := range ids {
		sb, err := h.cp.Get(r.Context(), p, id, false)
		if errors.Is(err, sandbox.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if sb.State != sandbox.StateRunning {
			continue
		}
		m, err := h.sandboxMetrics(r.Context(), p, sb)
		if err != nil {
			h.log.Warn("e2b metrics", "sandbox", id, "err", err)
			continue
		}
		out[id] = m
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
	return nil
}

// sandboxMetrics reads the sandbox's live figures from its host (cgroup
// CPU, memory against the sandbox's own limit, disk against its own size).
// They are truer than pt-agent's /metrics, whose /proc/meminfo shows the
// host's memory inside a container.
func (h *Handler) sandboxMetrics(ctx context.Context, p controlplane.Principal, sb sandbox.Sandbox) (metricView, error) {
	m, err := h.cp.Metrics(ctx, p, sb.ID)
	if err != nil {
		return metricView{}, err
	}
	at := m.At
	if at.IsZero() {
		at = time.Now()
	}
	at = at.UTC()
	return metricView{
		Timestamp: at.Format(time.RFC3339Nano), TimestampUnix: at.Unix(),
		CPUCount: cpuCount(sb), CPUUsedPct: m.CPUPercent,
		MemUsed: m.MemoryUsedBytes, MemTotal: m.MemoryLimitBytes,
		DiskUsed: m.DiskUsedBytes, DiskTotal: m.DiskSizeBytes,
	}, nil
}

// metricsIDs are the sandboxes a batch metrics query names.
func metricsIDs(q url.Values) ([]string, error) {
	ids := splitCSV(q.Get("sandbox_ids"))
	if len(ids) == 0 || len(ids) > 100 {
		return nil, badRequest("sandbox_ids must name 1 to 100 sandboxes, comma-separated")
	}
	return ids, nil
}

func splitCSV(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// maxJSONBody bounds request bodies (envVars may be up to 256 KiB).
const maxJSONBody = 1 << 20

// decodeJSON decodes one JSON object. Unknown fields are ignored (newer
// SDKs add fields); wrong types and malformed JSON are 400. An empty body
// decodes to the zero value when allowEmpty.
func decodeJSON(r *http.Request, v any, allowEmpty bool) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxJSONBody))
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) {
		if allowEmpty {
			return nil
		}
		return badRequest("request body is required")
	}
	if err != nil {
		var te *json.UnmarshalTypeError
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &te):
			return badRequest("field %q has the wrong type (%s)", te.Field, te.Value)
		case errors.As(err, &mbe):
			return &apiError{Status: http.StatusRequestEntityTooLarge, Msg: fmt.Sprintf("request body is over %d bytes", maxJSONBody)}
		}
		return badRequest("malformed JSON body: %v", err)
	}
	return nil
}
