package daytona

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/platinum-dev/platinum/internal/compat/compatkit"
	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// apiError is an error with its Daytona status, built by handlers for
// cases the domain never sees (malformed JSON, unsupported options).
type apiError = compatkit.APIError

// badRequest is a 400 with a formatted message.
func badRequest(format string, args ...any) error { return compatkit.BadRequest(format, args...) }

// errorBody is the Daytona API's error shape (its NestJS exception
// filter): the SDK reads message and picks its error class by statusCode
// (404 DaytonaNotFoundError, 409 DaytonaConflictError, 429
// DaytonaRateLimitError, …).
type errorBody struct {
	StatusCode int    `json:"statusCode"`
	Error      string `json:"error"`
	Message    string `json:"message"`
	Path       string `json:"path"`
	Timestamp  string `json:"timestamp"`
}

// transitional reports whether s is on its way somewhere: an operation
// refused then is "a state change in progress" (409), any other refusal
// a wrong state (400), as Daytona answers.
func transitional(s sandbox.State) bool {
	switch s {
	case sandbox.StateCreating, sandbox.StateStarting, sandbox.StateStopping,
		sandbox.StateArchiving, sandbox.StateRestoring, sandbox.StateDeleting:
		return true
	}
	return false
}

// errorStatus is the one mapping of control-plane errors onto Daytona
// statuses.
func errorStatus(err error) (int, errorBody) {
	var ae *apiError
	var fe *sandbox.FieldError
	var se *controlplane.StateError
	var ce *controlplane.CapacityError
	var qe *sandbox.QuotaError
	var nr *controlplane.NotResizableError
	var dg *controlplane.DiskGrowError
	var ch *controlplane.ChildrenError
	var de *controlplane.DestroyedError
	status, msg := http.StatusInternalServerError, "internal error; retry, and report it if it persists"
	switch {
	case errors.As(err, &ae):
		status, msg = ae.Status, ae.Msg
	case errors.As(err, &fe):
		status, msg = http.StatusBadRequest, fe.Error()
	case errors.As(err, &se):
		status, msg = http.StatusBadRequest, fmt.Sprintf("Sandbox is not in valid state (%s): %s", daytonaState(se.State), se.Error())
		if transitional(se.State) {
			status, msg = http.StatusConflict, fmt.Sprintf("Sandbox state change in progress (%s)", daytonaState(se.State))
		}
	case errors.As(err, &ce):
		status, msg = http.StatusServiceUnavailable, ce.Error()
	case errors.Is(err, sandbox.ErrNotFound):
		status, msg = http.StatusNotFound, err.Error()
	case errors.Is(err, sandbox.ErrInvalidArgument):
		status, msg = http.StatusBadRequest, err.Error()
	case errors.Is(err, sandbox.ErrUnauthenticated):
		status, msg = http.StatusUnauthorized, "missing or unknown API key: set DAYTONA_API_KEY to a Platinum token"
	case errors.Is(err, sandbox.ErrForbidden):
		status, msg = http.StatusForbidden, err.Error()
	case errors.As(err, &qe):
		status, msg = http.StatusTooManyRequests, qe.Error()
	case errors.As(err, &nr), errors.As(err, &dg), errors.As(err, &ch):
		status, msg = http.StatusBadRequest, err.Error()
	case errors.As(err, &de):
		status, msg = http.StatusConflict, de.Error()
	case errors.Is(err, sandbox.ErrConflict), errors.Is(err, sandbox.ErrAlreadyExists):
		status, msg = http.StatusConflict, err.Error()
	case errors.Is(err, sandbox.ErrUnavailable):
		status, msg = http.StatusServiceUnavailable, err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		status, msg = http.StatusGatewayTimeout, "the operation timed out; retry"
	}
	return status, errorBody{StatusCode: status, Error: http.StatusText(status), Message: msg}
}

// writeError is the one place errors become Daytona answers. Internal
// causes are logged; the client gets a message safe to show.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, body := errorStatus(err)
	if status == http.StatusInternalServerError {
		h.log.Error("daytona request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	var ae *apiError
	var ce *controlplane.CapacityError
	if errors.As(err, &ae) && ae.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.RetryAfter))
	} else if errors.As(err, &ce) || status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5")
	}
	body.Path, body.Timestamp = r.URL.Path, time.Now().UTC().Format(time.RFC3339Nano)
	writeJSON(w, status, body)
}

// writeToolboxError answers a toolbox call ptd refuses before pt-agent
// sees it, in the daemon's error shape.
func writeToolboxError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	writeJSON(w, status, map[string]any{
		"statusCode": status, "message": msg, "code": code, "source": "DAYTONA_DAEMON",
		"path": r.URL.Path, "method": r.Method, "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
	})
}

// writeJSON is the one JSON answer both compatibility layers give.
var writeJSON = compatkit.WriteJSON
