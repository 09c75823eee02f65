package platinum

import (
	"context"
	"encoding/json"
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
	return fetchField[[]T](ctx, c, method, path, query, in, "rows", format, args...)
}

// fetchField is fetchJSON for answers that wrap what the caller wants in
// one member of an object ({"contexts": [...]}, {"created": true}): it
// returns that member's value (T's zero value when it is absent).
func fetchField[T any](ctx context.Context, c *Client, method, path string, query url.Values, in any, name, format string, args ...any) (T, error) {
	out := member[T]{name: name}
	if _, err := c.doJSON(ctx, method, path, query, in, &out); err != nil {
		var zero T
		return zero, wrapCall(err, format, args...)
	}
	return out.v, nil
}

// member decodes one member, name, of a JSON object into v.
type member[T any] struct {
	name string
	v    T
}

func (m *member[T]) UnmarshalJSON(b []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	if raw, ok := obj[m.name]; ok {
		return json.Unmarshal(raw, &m.v)
	}
	return nil
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
