package platinum

import (
	"context"
	"fmt"
	"net/url"
)

// Most of the SDK's methods are one JSON call whose answer is returned as
// is, with a failure named after the operation ("delete artifact art_1:
// …"). The helpers below are that call, so each method states only its
// route, its body and its name, and the wrapping — which keeps errors.As
// reaching *APIError — is the same everywhere.

// fetchJSON does one JSON call (doJSON) and returns its answer decoded
// into a new T. A failure is wrapped as "<format args>: <err>".
func fetchJSON[T any](ctx context.Context, c *Client, method, path string, query url.Values, in any, format string, args ...any) (*T, error) {
	var out T
	if _, err := c.doJSON(ctx, method, path, query, in, &out); err != nil {
		return nil, wrapCall(err, format, args...)
	}
	return &out, nil
}

// fetchRows is fetchJSON for list routes, which answer {"rows": [...]}:
// it returns the rows themselves.
func fetchRows[T any](ctx context.Context, c *Client, method, path string, query url.Values, in any, format string, args ...any) ([]T, error) {
	var out struct {
		Rows []T `json:"rows"`
	}
	if _, err := c.doJSON(ctx, method, path, query, in, &out); err != nil {
		return nil, wrapCall(err, format, args...)
	}
	return out.Rows, nil
}

// callJSON is fetchJSON for calls whose answer the caller does not need
// (deletes, signals and the like).
func callJSON(ctx context.Context, c *Client, method, path string, query url.Values, in any, format string, args ...any) error {
	if _, err := c.doJSON(ctx, method, path, query, in, nil); err != nil {
		return wrapCall(err, format, args...)
	}
	return nil
}

// wrapCall names a failed call: the same text fmt.Errorf(format+": %w")
// gives, with err still reachable by errors.Is and errors.As.
func wrapCall(err error, format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
}

// nonNil turns a list call's nil rows into an empty slice, for the list
// methods that promise a non-nil result (so encoding it gives [] and
// callers need no nil check).
func nonNil[T any](rows []T, err error) ([]T, error) {
	if err == nil && rows == nil {
		rows = []T{}
	}
	return rows, err
}
