package mcpserver

import (
	"context"
	"errors"
	"fmt"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// argNames maps the /v1 field an API error names to the tool argument a
// model passed, where the two differ (tools take seconds, not ms).
var argNames = map[string]string{
	"timeout_ms": "timeout_seconds",
	"ttl_ms":     "ttl_seconds",
	"cmd":        "command",
}

// toolError turns an SDK error into the error a tool returns, which the MCP
// SDK sends as a tool result with isError set. Its text starts with the
// API's stable error code in brackets ("[not_found] …") so a model (or a
// program) can tell "no such sandbox" from "bad argument" without parsing
// prose, and names the argument an invalid_request is about.
//
// This is the only place tool errors are shaped: one error mapper for the
// MCP transport, as /v1 has errors.go.
func toolError(err error) error {
	var ae *platinum.APIError
	if errors.As(err, &ae) {
		msg := fmt.Sprintf("[%s] %s", ae.Code, ae.Message)
		if f := ae.Field(); f != "" {
			if a, ok := argNames[f]; ok {
				f = a
			}
			msg += fmt.Sprintf(" (argument %q)", f)
		}
		return errors.New(msg)
	}
	var se *platinum.StateError
	if errors.As(err, &se) {
		return fmt.Errorf("[%s] %s", platinum.CodeSandboxFailed, se.Error())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("[cancelled] %w", err)
	}
	return fmt.Errorf("[%s] %w", platinum.CodeInternal, err)
}

// argError is a bad argument caught before any /v1 call.
func argError(arg, format string, a ...any) error {
	return fmt.Errorf("[%s] %s (argument %q)", platinum.CodeInvalidRequest, fmt.Sprintf(format, a...), arg)
}
