package e2b

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/platinum-dev/platinum/internal/compat/compatkit"
	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// apiError is an error with its E2B status, built by handlers for cases
// the domain never sees (malformed JSON, unsupported options, waits that
// ran out). Its Code is E2B's optional machine-readable error_code.
type apiError = compatkit.APIError

// badRequest is a 400 with a formatted message.
func badRequest(format string, args ...any) error { return compatkit.BadRequest(format, args...) }

// errorBody is E2B's error shape: the SDK branches on the integer code in
// the body (404 → SandboxNotFoundError, 409 on pause → false), so every
// error carries it.
type errorBody struct {
	Code      int    `json:"code"`
	Message   string `json:"message"`
	ErrorCode string `json:"error_code,omitempty"`
}

// writeError is the one place control-plane errors become E2B statuses.
// Internal causes are logged; the client gets a message safe to show.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, body, retry := errorStatus(err)
	if status >= 500 && status != http.StatusNotImplemented && !errors.As(err, new(*controlplane.CapacityError)) {
		h.log.ErrorContext(r.Context(), "e2b request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retry))
	}
	writeJSON(w, status, body)
}

func errorStatus(err error) (int, errorBody, int) {
	var ae *apiError
	var fe *sandbox.FieldError
	var se *controlplane.StateError
	var ce *controlplane.CapacityError
	status, msg, code, retry := http.StatusInternalServerError, "internal error; retry, and report it if it persists", "internal_server_error", 0
	switch {
	case errors.As(err, &ae):
		status, msg, code, retry = ae.Status, ae.Msg, ae.Code, ae.RetryAfter
	case errors.As(err, &fe):
		status, msg, code = http.StatusBadRequest, fe.Error(), ""
	case errors.As(err, &se):
		status, msg, code = http.StatusConflict, se.Error(), ""
	case errors.As(err, &ce):
		status, msg, code, retry = http.StatusServiceUnavailable, ce.Error(), "capacity", 5
	case errors.As(err, new(*controlplane.NoSpaceError)):
		status, msg, code = http.StatusInsufficientStorage, err.Error(), ""
	case errors.Is(err, sandbox.ErrQuotaExceeded):
		// E2B answers a sandbox limit with 429, which its SDKs raise as
		// a rate-limit error.
		status, msg, code = http.StatusTooManyRequests, err.Error(), ""
	case errors.Is(err, sandbox.ErrNotFound):
		status, msg, code = http.StatusNotFound, err.Error(), ""
	case errors.Is(err, sandbox.ErrInvalidArgument):
		status, msg, code = http.StatusBadRequest, err.Error(), ""
	case errors.Is(err, sandbox.ErrUnauthenticated):
		status, msg, code = http.StatusUnauthorized, "missing or unknown API key: set E2B_API_KEY to a Platinum token", ""
	case errors.Is(err, sandbox.ErrForbidden):
		status, msg, code = http.StatusForbidden, err.Error(), ""
	case errors.Is(err, sandbox.ErrConflict), errors.Is(err, sandbox.ErrAlreadyExists):
		status, msg, code = http.StatusConflict, err.Error(), ""
	case errors.Is(err, sandbox.ErrUnavailable):
		status, msg, code, retry = http.StatusServiceUnavailable, err.Error(), "", 5
	case errors.Is(err, context.DeadlineExceeded):
		status, msg, code = http.StatusGatewayTimeout, "the operation timed out; retry", ""
	}
	return status, errorBody{Code: status, Message: msg, ErrorCode: code}, retry
}

// errorMessage is the client-safe message errorStatus would send.
func errorMessage(err error) string {
	_, body, _ := errorStatus(err)
	return body.Message
}

// writeJSON is the one JSON answer both compatibility layers give.
var writeJSON = compatkit.WriteJSON
