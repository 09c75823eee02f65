package controlplane

import (
	"fmt"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// IDKindError says an ID of one kind was passed where another kind is
// expected (a workflow ID as a session ID, a session ID as a sandbox ID, or
// the reverse; docs/sessions.md). It is a not-found error: the thing asked
// for does not exist under that ID. The core returns it for a session ID on
// a sandbox route; internal/sessions for the other mix-ups.
type IDKindError struct {
	// Field is the request field or path parameter at fault.
	Field string
	// Got is the kind of ID passed (workflow_id, agent_session_id,
	// session_id, sandbox_id), or "" when unknown.
	Got string
	// Want is the kind expected.
	Want string
	// ID is the value passed.
	ID string
	// Hint says what to do instead.
	Hint string
}

// Error implements error.
func (e *IDKindError) Error() string {
	msg := fmt.Sprintf("%s %q: ", e.Field, e.ID)
	if e.Got != "" {
		msg += fmt.Sprintf("that is a %s, not a %s; ", e.Got, e.Want)
	} else {
		msg += "no such " + e.Want + "; "
	}
	msg += fmt.Sprintf("%s expects a %s", e.Field, e.Want)
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// Unwrap makes errors.Is(err, sandbox.ErrNotFound) hold.
func (e *IDKindError) Unwrap() error { return sandbox.ErrNotFound }
