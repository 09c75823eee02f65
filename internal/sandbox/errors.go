package sandbox

import "errors"

// Error categories. Every layer wraps one of these with context
// (fmt.Errorf("sandbox %q: %w", id, ErrNotFound)); each transport maps them
// to its status codes in exactly one place.
var (
	ErrNotFound        = errors.New("not found")
	ErrAlreadyExists   = errors.New("already exists")
	ErrInvalidArgument = errors.New("invalid argument")
	ErrConflict        = errors.New("conflict")
	ErrUnavailable     = errors.New("unavailable")
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
)
