package main

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// usageError is a bad command line: exit code 2, with the verb's usage.
type usageError struct {
	msg, usage string
}

// Error returns the message without the usage.
func (e *usageError) Error() string { return e.msg }

func usageErr(usage, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), usage: usage}
}

// helpError asks for the usage on stdout and exit code 0 (--help).
type helpError struct{ usage string }

// Error is never shown; report prints the usage instead.
func (e *helpError) Error() string { return "help requested" }

func errHelp(usage string) error { return &helpError{usage: usage} }

// exitError ends pt with a given code, printing msg (if any) first. It
// carries a remote command's exit code out of `pt sandbox exec`.
type exitError struct {
	code int
	msg  string
}

// Error names the exit code, for logs and tests.
func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// hintError attaches what to do next to an error, when the verb knows
// better than the generic hints.
type hintError struct {
	err  error
	hint string
}

// Error returns the wrapped error's text; the hint is printed apart.
func (e *hintError) Error() string { return e.err.Error() }

// Unwrap exposes the wrapped error to errors.Is and errors.As.
func (e *hintError) Unwrap() error { return e.err }

func withHint(err error, hint string) error {
	if err == nil {
		return nil
	}
	return &hintError{err: err, hint: hint}
}

const tokenHint = "set PT_TOKEN to the token ptd printed on first start (or saved in <data-dir>/admin-token, by default /var/lib/platinum/admin-token)"

// message is the one-line text pt prints for err. API errors show the
// server's message, which is written for people and says what went wrong.
func message(err error) string {
	var ae *platinum.APIError
	if errors.As(err, &ae) {
		return ae.Message
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "cannot reach ptd: " + dnsErr.Error()
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		cause := opErr.Err.Error()
		if errors.Is(err, syscall.ECONNREFUSED) {
			cause = "connection refused"
		}
		if opErr.Addr != nil {
			return fmt.Sprintf("cannot reach ptd at %s: %s", opErr.Addr, cause)
		}
		return "cannot reach ptd: " + cause
	}
	return err.Error()
}

// requestID is the X-Request-Id of the API error in err ("" if none).
func requestID(err error) string {
	var ae *platinum.APIError
	if errors.As(err, &ae) {
		return ae.RequestID
	}
	return ""
}

// isUnreachable reports whether err means no ptd answered at all.
func isUnreachable(err error) bool {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &dnsErr) ||
		(errors.As(err, &opErr) && opErr.Op == "dial")
}

// flagFor maps an API field to the pt flag that sets it.
var flagFor = map[string]string{
	"template": "--template", "cpu": "--cpu", "ram_mb": "--ram", "disk_gb": "--disk",
	"name": "--name", "env": "--env", "metadata": "--metadata", "state": "--state",
	"limit": "--limit", "offset": "--offset", "timeout_ms": "--timeout", "cwd": "--cwd",
	"wait_timeout_ms": "--timeout", "type": "--type", "auto_stop_minutes": "--auto-stop",
	"auto_archive_days": "--auto-archive", "auto_delete_days": "--auto-delete",
	"parent_id": "--parent", "roots_only": "--roots", "auto_resume": "--auto-resume", "from": "--from", "to": "--to",
}

// hint says what to do next about err, or "" when there is nothing useful.
func (a *app) hint(err error) string {
	var he *hintError
	if errors.As(err, &he) {
		return he.hint
	}
	if errors.Is(err, platinum.ErrNoToken) {
		return tokenHint
	}
	if isUnreachable(err) {
		base := a.getenv("PT_API_URL")
		if base == "" {
			base = platinum.DefaultBaseURL
		}
		return "is ptd running? start it with `scripts/ptd-up.sh` or `ptd serve` (pt looked for it at " + base + "; set PT_API_URL if it listens elsewhere)"
	}
	var se *platinum.StateError
	if errors.As(err, &se) {
		return fmt.Sprintf("see the sandbox with `pt sandbox get %s`; delete it with `pt sandbox rm %s`", se.ID, se.ID)
	}
	var ae *platinum.APIError
	if !errors.As(err, &ae) {
		return ""
	}
	switch ae.Code {
	case platinum.CodeUnauthorized:
		return tokenHint
	case platinum.CodeForbidden:
		return "this token may not do that; creating organizations needs the admin token ptd printed on first start (<data-dir>/admin-token)"
	case platinum.CodeNotFound:
		if ae.Field() == "template" {
			return "see the available templates with `pt template list`"
		}
		return "list your sandboxes with `pt sandbox list`"
	case platinum.CodeInvalidRequest:
		if f, ok := flagFor[ae.Field()]; ok {
			return "check the value of " + f + "; see the command's --help"
		}
		return "check the command's arguments; see its --help"
	case platinum.CodeSandboxNotReady:
		switch st := ae.State(); st {
		case platinum.StateStopped, platinum.StateArchived, platinum.StateFailed:
			return fmt.Sprintf("the sandbox is %s; it must be running: start it with `pt sandbox start ID --wait`", st)
		case "":
			return "check the sandbox's state with `pt sandbox get`"
		default:
			return fmt.Sprintf("the sandbox is %s; it must be running: check it with `pt sandbox get`", st)
		}
	case platinum.CodeConflict:
		if kids := ae.Children(); len(kids) > 0 {
			return fmt.Sprintf("delete its children first (`pt sandbox rm %s`), then this sandbox; deleting a sandbox never deletes its children", strings.Join(kids, " "))
		}
		if st := ae.State(); st != "" {
			return fmt.Sprintf("the sandbox is %s, which does not allow this: check it with `pt sandbox get`", st)
		}
		return "check the sandbox's state with `pt sandbox get`"
	case platinum.CodeNoSpace:
		return "the disk is full: free space in the sandbox, or create one with a larger --disk"
	case platinum.CodeEnvTooLarge:
		return "a sandbox's environment is limited to 256 KiB in all: remove variables with `pt sandbox env ID --unset KEY`, or put large values in a file (`pt sandbox cp`)"
	case platinum.CodeEnvVarTooLarge:
		return "one KEY=VALUE is limited to 128 KiB: put large values in a file with `pt sandbox cp` instead"
	case platinum.CodePayloadTooLarge:
		return "the request is too large; upload big data with `pt sandbox cp` instead"
	case platinum.CodeUnavailable:
		return "ptd cannot serve this right now; retry in a few seconds"
	case platinum.CodeInternal:
		return "this is a bug in ptd; its log has the details"
	}
	return ""
}

// sandboxIDs formats ids for messages.
func sandboxIDs(ids []string) string { return strings.Join(ids, ", ") }
