package sandbox

import (
	"errors"
	"fmt"
)

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

// QuotaError is a request that would take a tree of sandboxes (a
// top-level sandbox and its descendants) or an org's active sandboxes past
// a limit. It wraps ErrQuotaExceeded; transports answer 429
// quota_exceeded with its fields.
type QuotaError struct {
	// Scope is "tree" (a sandbox and its descendants) or "org" (an org's
	// active sandboxes).
	Scope  string
	Limit  string // sandboxes, cpu, ram_mb
	Max    float64
	Wanted float64
}

func (e *QuotaError) Error() string {
	if e.Scope == "org" {
		return fmt.Sprintf("this org's active sandboxes would use %g %s; the org's limit is %g: stop or delete sandboxes, or ask for less", e.Wanted, e.Limit, e.Max)
	}
	return fmt.Sprintf("this sandbox tree would use %g %s; its limit is %g: delete children first or ask for less", e.Wanted, e.Limit, e.Max)
}

// ErrQuotaExceeded is what a QuotaError wraps.
var ErrQuotaExceeded = errors.New("quota exceeded")

// Unwrap makes errors.Is(err, ErrQuotaExceeded) hold.
func (e *QuotaError) Unwrap() error { return ErrQuotaExceeded }

// NotFoundFieldError is a request field that names something that does
// not exist (or that the caller may not see): ErrNotFound, with the field
// transports report.
type NotFoundFieldError struct{ Name string }

func (e *NotFoundFieldError) Error() string { return "not found" }

// Unwrap makes errors.Is(err, ErrNotFound) hold.
func (e *NotFoundFieldError) Unwrap() error { return ErrNotFound }

// Field names the request field that referred to the missing thing.
func (e *NotFoundFieldError) Field() string { return e.Name }
