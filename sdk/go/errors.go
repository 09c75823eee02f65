package platinum

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Stable error codes ptd puts in the "code" field of an error answer. Match
// them with IsCode rather than comparing messages, which may change.
const (
	CodeInvalidRequest  = "invalid_request"
	CodeUnauthorized    = "unauthorized"
	CodeForbidden       = "forbidden"
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
	CodePayloadTooLarge = "payload_too_large"
	CodeNoSpace         = "no_space"
	CodeSandboxNotReady = "sandbox_not_ready"
	CodeUnavailable     = "unavailable"
	CodeInternal        = "internal"

	// CodeEnvTooLarge: the sandbox's environment would be over 256 KiB.
	CodeEnvTooLarge = "env_too_large"
	// CodeEnvVarTooLarge: one KEY=VALUE string is over Linux's 128 KiB.
	CodeEnvVarTooLarge = "env_var_too_large"
	// CodeSandboxNotResizable: a running sandbox cannot change cpu or
	// ram_mb live; the error is a *NotResizableError.
	CodeSandboxNotResizable = "sandbox_not_resizable"
	// CodeDiskGrowUnsupported: the guest cannot grow its filesystem
	// online; stop the sandbox, then resize it.
	CodeDiskGrowUnsupported = "disk_grow_unsupported"
	// CodeSandboxFailed: a wait for a state ended with the sandbox failed
	// (the body is its record). Waits return it as a *StateError.
	CodeSandboxFailed = "sandbox_failed"
	// CodeCapacity: the host's start queue could not admit a start (503,
	// Retry-After); the sandbox stays stopped: call start again later.
	CodeCapacity = "capacity"
)

// APIError is an error answer from ptd: its HTTP status, the stable code and
// the human message, which says what to do next. Body holds the whole
// decoded JSON answer, for the extra fields some codes carry ("field" on
// invalid_request, "state" on conflict and sandbox_not_ready).
type APIError struct {
	StatusCode int
	Code       string
	Message    string
	Body       map[string]any
	// RequestID is the answer's X-Request-Id (ptd logs it with every line
	// about the request): quote it when reporting a problem. "" when the
	// server sent none.
	RequestID string
}

// RequestIDHeader is the header ptd answers every request with; a request
// that sends one (1 to 128 printable ASCII characters) keeps its own id.
const RequestIDHeader = "X-Request-Id"

// Error returns the server's message with its code and status.
func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	return fmt.Sprintf("%s (%s, HTTP %d)", msg, e.Code, e.StatusCode)
}

// Field returns the request field the error is about ("" if none), so a
// caller can point at the bad input.
func (e *APIError) Field() string { return e.str("field") }

// State returns the sandbox state a conflict or sandbox_not_ready error
// is about ("" if none).
func (e *APIError) State() State { return State(e.str("state")) }

// Children returns the live children named by a conflict from deleting a
// parent (nil if none): delete them first.
func (e *APIError) Children() []string {
	raw, _ := e.Body["children"].([]any)
	var ids []string
	for _, v := range raw {
		if s, ok := v.(string); ok {
			ids = append(ids, s)
		}
	}
	return ids
}

func (e *APIError) str(k string) string {
	s, _ := e.Body[k].(string)
	return s
}

// IsNotFound reports whether err is (or wraps) an APIError with code
// not_found, e.g. an unknown, deleted or other organization's sandbox.
func IsNotFound(err error) bool { return IsCode(err, CodeNotFound) }

// IsCode reports whether err is (or wraps) an APIError with the given code.
func IsCode(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}

// maxErrorBody bounds how much of an error answer is read: errors are small,
// and a misconfigured proxy could answer with anything.
const maxErrorBody = 64 << 10

// decodeAPIError builds an APIError from a non-2xx response. Answers that are
// not ptd's JSON shape (a proxy's HTML page, an old server) still get a code
// derived from the status, so IsNotFound and friends keep working.
func decodeAPIError(resp *http.Response) *APIError {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	ae := &APIError{StatusCode: resp.StatusCode, RequestID: resp.Header.Get(RequestIDHeader)}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err == nil && body != nil {
		ae.Body = body
		ae.Code, _ = body["code"].(string)
		ae.Message, _ = body["error"].(string)
		if id, _ := body["request_id"].(string); ae.RequestID == "" {
			ae.RequestID = id
		}
		if ae.Message == "" {
			ae.Message, _ = body["message"].(string)
		}
	} else if s := strings.TrimSpace(string(raw)); s != "" {
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		ae.Message = s
	}
	if ae.Code == "" {
		ae.Code = codeForStatus(resp.StatusCode)
	}
	if ae.Message == "" {
		ae.Message = strings.ToLower(http.StatusText(resp.StatusCode))
	}
	return ae
}

// codeForStatus maps a status to the code ptd uses for it.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeInvalidRequest
	case http.StatusUnauthorized:
		return CodeUnauthorized
	case http.StatusForbidden:
		return CodeForbidden
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusConflict:
		return CodeConflict
	case http.StatusRequestEntityTooLarge:
		return CodePayloadTooLarge
	case http.StatusInsufficientStorage:
		return CodeNoSpace
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	default:
		if status >= 500 {
			return CodeInternal
		}
		return fmt.Sprintf("http_%d", status)
	}
}

// failedWait turns a sandbox_failed answer (a server-side wait that ended
// with the sandbox failed) into the record and the *StateError waits
// return; other errors come back as they are, with a nil record.
func failedWait(err error, id string, want State) (*Sandbox, error) {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != CodeSandboxFailed {
		return nil, err
	}
	var sb Sandbox
	if b, merr := json.Marshal(ae.Body); merr == nil {
		json.Unmarshal(b, &sb)
	}
	if sb.ID == "" {
		sb.ID = id
	}
	sb.State = StateFailed
	return &sb, &StateError{ID: sb.ID, Want: want, Got: StateFailed, Reason: sb.Reason}
}

// StateError is returned by waits when the sandbox settled in a state other
// than the one asked for (failed, or deleted while waiting), so waiting
// longer cannot help. Reason is the server's explanation, if any.
type StateError struct {
	ID     string
	Want   State
	Got    State
	Reason string
}

// Error says which state was reached instead of the wanted one, and why.
func (e *StateError) Error() string {
	s := fmt.Sprintf("sandbox %s is %s, not %s", e.ID, e.Got, e.Want)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}
