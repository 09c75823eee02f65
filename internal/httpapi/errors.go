package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/artifacts"
	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/events"
	"github.com/platinum-dev/platinum/internal/requestid"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/sessions"
	"github.com/platinum-dev/platinum/internal/store"
)

// apiError is a request-level error with a stable code, built by handlers
// for problems the domain never sees (malformed JSON, bad query values).
type apiError struct {
	status int
	code   string
	msg    string
	extra  map[string]any
}

func (e *apiError) Error() string { return e.msg }

func badRequest(msg string, field string) error {
	e := &apiError{status: http.StatusBadRequest, code: "invalid_request", msg: msg}
	if field != "" {
		e.extra = map[string]any{"field": field}
	}
	return e
}

// writeError is the one place errors become HTTP statuses and codes.
// Internal causes are logged; the client gets a message safe to show.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, body := a.errorBody(err)
	if id := requestid.From(r.Context()); id != "" {
		body["request_id"] = id
	}
	_, busy := errors.AsType[*controlplane.CapacityError](err)
	if busy {
		w.Header().Set("Retry-After", "5") // a busy host is not an error of ours
	}
	if status >= 500 && !busy {
		a.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, status, body)
}

func (a *API) errorBody(err error) (int, map[string]any) {
	body := map[string]any{}
	var ae *apiError
	var fe *sandbox.FieldError
	var se *controlplane.StateError
	var evt *controlplane.EnvVarTooLargeError
	var ce *controlplane.ChildrenError
	var nr *controlplane.NotResizableError
	var ms *controlplane.MemorySnapshotError
	var qe *sandbox.QuotaError
	var dg *controlplane.DiskGrowError
	var tte *controlplane.TTLExceededError
	var capErr *controlplane.CapacityError
	var de *controlplane.DestroyedError
	var nf interface{ Field() string }
	var ik *controlplane.IDKindError
	var snr *sessions.NotReadyError
	var epe *events.EventsPrunedError
	var atl *artifacts.TooLargeError
	var tpe *controlplane.TemplateError
	var tiu *controlplane.TemplateInUseError
	var nospace *controlplane.NoSpaceError
	var gpe *controlplane.GPUsUnavailableError
	status, code, msg := http.StatusInternalServerError, "internal", "internal error; retry, and report it if it persists"
	switch {
	case errors.As(err, &ae):
		status, code, msg = ae.status, ae.code, ae.msg
		for k, v := range ae.extra {
			body[k] = v
		}
	case errors.As(err, &fe):
		status, code, msg = http.StatusBadRequest, "invalid_request", fe.Error()
		body["field"] = fe.Field
	case errors.Is(err, controlplane.ErrEnvTooLarge):
		status, code, msg = http.StatusRequestEntityTooLarge, "env_too_large", err.Error()
	case errors.As(err, &evt):
		status, code, msg = http.StatusBadRequest, "env_var_too_large", evt.Error()
		body["field"] = "env"
	case errors.As(err, &capErr):
		status, code, msg = http.StatusServiceUnavailable, "capacity", capErr.Error()
		body["reason"], body["queued_ms"] = capErr.Reason, capErr.Queued.Milliseconds()
	case errors.As(err, &tte):
		status, code, msg = http.StatusBadRequest, "sandbox_ttl_exceeded", tte.Error()
		body["field"], body["max_ttl_ms"] = "ttl_ms", tte.MaxTTLMs
	case errors.As(err, &de):
		status, code, msg = http.StatusConflict, "sandbox_destroyed", de.Error()
	case errors.As(err, &dg):
		status, code, msg = http.StatusConflict, "disk_grow_unsupported", dg.Error()
	case errors.As(err, &qe):
		status, code, msg = http.StatusTooManyRequests, "quota_exceeded", qe.Error()
		body["limit"], body["max"] = qe.Limit, qe.Max
		if qe.Scope != "" {
			body["scope"] = qe.Scope
		}
	case errors.As(err, &epe):
		status, code, msg = http.StatusGone, "events_pruned", epe.Error()
		body["pruned_through"] = epe.PrunedThrough
	case errors.As(err, &gpe):
		status, code, msg = http.StatusConflict, "gpus_unavailable", gpe.Error()
		avail := []map[string]any{}
		for _, h := range gpe.Hosts {
			row := map[string]any{"host_id": h.HostID, "gpus": h.GPUs, "models": h.Models}
			if h.Problem != "" {
				row["problem"] = h.Problem
			}
			avail = append(avail, row)
		}
		body["field"], body["available"] = "gpus", avail
	case errors.As(err, &tpe):
		status, code, msg = categoryStatus(err), tpe.Code, tpe.Error()
		if tpe.Code == "upload_too_large" {
			status, body["max_bytes"] = http.StatusRequestEntityTooLarge, tpe.MaxBytes
		}
		if tpe.Field != "" {
			body["field"] = tpe.Field
		}
		if tpe.Line > 0 {
			body["line"] = tpe.Line
		}
	case errors.As(err, &tiu):
		status, code, msg = http.StatusConflict, "template_in_use", tiu.Error()
		body["sandboxes"], body["snapshots"] = nonNilStrings(tiu.Sandboxes), nonNilStrings(tiu.Snapshots)
	case errors.As(err, &atl):
		status, code, msg = http.StatusRequestEntityTooLarge, "artifact_too_large", atl.Error()
		body["max_bytes"] = atl.Max
	case errors.Is(err, controlplane.ErrIdempotencyKeyReused):
		status, code, msg = http.StatusConflict, "idempotency_key_reused", err.Error()
	case errors.Is(err, controlplane.ErrIdempotencyKeyInProgress):
		status, code, msg = http.StatusConflict, "idempotency_key_in_progress", err.Error()
		body["retry_after_ms"] = 1000
	case errors.As(err, &ms):
		status, code, msg = http.StatusConflict, "memory_snapshot_unsupported", ms.Error()
		body["runtime"], body["reason"] = ms.Class, ms.Reason
	case errors.As(err, &nr):
		status, code, msg = http.StatusConflict, "sandbox_not_resizable", nr.Error()
		body["live_resize"] = map[string]any{"supported": false, "reason": nr.Reason}
		body["hint"] = map[string]any{"action": "stop_then_resize", "applies_at": "restart",
			"steps": []string{"POST /v1/sandboxes/" + nr.ID + "/stop", "POST /v1/sandboxes/" + nr.ID + "/resize"}}
	case errors.As(err, &ce):
		status, code, msg = http.StatusConflict, "conflict", ce.Error()
		body["children"] = ce.Children
	case errors.As(err, &ik):
		status, code, msg = http.StatusNotFound, "not_found", ik.Error()
		body["field"], body["expected"] = ik.Field, ik.Want
		if ik.Got != "" {
			body["got"] = ik.Got
		}
	case errors.As(err, &snr):
		status, code, msg = http.StatusConflict, "not_ready", snr.Error()
		if snr.Status != store.SessionProvisioning {
			code = "session_ended"
		}
		body["status"] = snr.Status
	case errors.As(err, &se):
		status, code, msg = http.StatusConflict, "sandbox_not_ready", se.Error()
		if se.Want != "" {
			code = "conflict"
		}
		body["state"] = se.State
	case errors.As(err, &nospace):
		status, code, msg = http.StatusInsufficientStorage, "no_space", nospace.Error()
	case errors.Is(err, agentclient.ErrNoSpace):
		status, code, msg = http.StatusInsufficientStorage, "no_space", "the sandbox's disk is full; free space or grow disk_gb"
	case errors.Is(err, sandbox.ErrNotFound):
		status, code, msg = http.StatusNotFound, "not_found", err.Error()
		if errors.As(err, &nf) {
			body["field"] = nf.Field()
		}
	case errors.Is(err, sandbox.ErrInvalidArgument):
		status, code, msg = http.StatusBadRequest, "invalid_request", err.Error()
	case errors.Is(err, sandbox.ErrUnauthenticated):
		status, code, msg = http.StatusUnauthorized, "unauthorized", "missing or unknown token: send Authorization: Bearer $PT_TOKEN"
	case errors.Is(err, sandbox.ErrForbidden):
		status, code, msg = http.StatusForbidden, "forbidden", err.Error()
	case errors.Is(err, sandbox.ErrConflict), errors.Is(err, sandbox.ErrAlreadyExists):
		status, code, msg = http.StatusConflict, "conflict", err.Error()
	case errors.Is(err, sandbox.ErrUnavailable):
		status, code, msg = http.StatusServiceUnavailable, "unavailable", err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		status, code, msg = http.StatusGatewayTimeout, "timeout", "the operation timed out; retry"
	}
	body["code"], body["error"] = code, msg
	return status, body
}

// categoryStatus is the status of an error's category, for errors that
// bring their own code.
func categoryStatus(err error) int {
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, sandbox.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, sandbox.ErrConflict), errors.Is(err, sandbox.ErrAlreadyExists):
		return http.StatusConflict
	case errors.Is(err, sandbox.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, sandbox.ErrInvalidArgument):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// writeJSON answers status with v as JSON and a newline (json.Encoder's
// output). A value that writes its own JSON (jsonAppender, the same bytes)
// does so into a pooled buffer; the rest go through encoding/json.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if ap, ok := v.(jsonAppender); ok {
		bp := jsonBufs.Get().(*[]byte)
		if b, ok := ap.appendJSON((*bp)[:0]); ok {
			b = append(b, '\n')
			if _, err := w.Write(b); err != nil {
				slog.Debug("write response", "err", err)
			}
			if cap(b) <= maxPooledJSON {
				*bp = b
				jsonBufs.Put(bp)
			}
			return
		}
		jsonBufs.Put(bp)
	}
	if err := json.NewEncoder(w).Encode(v); err != nil {
		slog.Debug("write response", "err", err)
	}
}

// jsonBufs are writeJSON's buffers for jsonAppenders; one over
// maxPooledJSON bytes (a sandbox with a lot of metadata) is not kept.
var jsonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

const maxPooledJSON = 64 << 10
