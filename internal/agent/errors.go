package agent

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"
)

// Error categories of the agent. Code wraps them (or returns fs/syscall
// errors) and the two mappers below turn them into Connect codes and HTTP
// statuses in one place each.
var (
	errInvalid      = errors.New("invalid argument")
	errInvalidPath  = errors.New("invalid path")
	errNotFound     = errors.New("not found")
	errExists       = errors.New("already exists")
	errPrecondition = errors.New("failed precondition")
	errUnauthorized = errors.New("unauthenticated")
)

// rpcError converts err to a *connect.Error with the code the e2b SDK
// expects (not_found → FileNotFoundError, already_exists → false, ...).
func rpcError(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	return connect.NewError(rpcCode(err), err)
}

func rpcCode(err error) connect.Code {
	switch {
	case errors.Is(err, errInvalid), errors.Is(err, errInvalidPath), errors.Is(err, unix.ENOTDIR),
		errors.Is(err, unix.EISDIR), errors.Is(err, unix.ENAMETOOLONG), errors.Is(err, unix.EINVAL):
		return connect.CodeInvalidArgument
	case errors.Is(err, errNotFound), errors.Is(err, fs.ErrNotExist):
		return connect.CodeNotFound
	case errors.Is(err, errExists), errors.Is(err, fs.ErrExist), errors.Is(err, unix.ENOTEMPTY):
		return connect.CodeAlreadyExists
	case errors.Is(err, fs.ErrPermission):
		return connect.CodePermissionDenied
	case errors.Is(err, errPrecondition):
		return connect.CodeFailedPrecondition
	case errors.Is(err, errUnauthorized):
		return connect.CodeUnauthenticated
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return connect.CodeResourceExhausted
	}
	return connect.CodeInternal
}

// httpStatus maps err to the status envd answers on its plain endpoints.
func httpStatus(err error) int {
	switch rpcCode(err) {
	case connect.CodeInvalidArgument, connect.CodeAlreadyExists, connect.CodeFailedPrecondition:
		return http.StatusBadRequest
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	case connect.CodeResourceExhausted:
		return http.StatusInsufficientStorage
	}
	return http.StatusInternalServerError
}

// writeErr answers a plain HTTP request with envd's JSON error body.
func writeErr(w http.ResponseWriter, err error) {
	code := ""
	if errors.Is(err, errInvalidPath) {
		code = "invalid_path"
	}
	writeHTTPError(w, httpStatus(err), err.Error(), code)
}

// writeHTTPError writes {"message": msg, "code": status} plus, when set, a
// machine-readable error_code.
func writeHTTPError(w http.ResponseWriter, status int, msg, errorCode string) {
	body := struct {
		Message   string `json:"message"`
		Code      int    `json:"code"`
		ErrorCode string `json:"error_code,omitempty"`
	}{msg, status, errorCode}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
