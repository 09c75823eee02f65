package httpapi

import "net/http"

// The helpers below are the tails that almost every handler shares: check
// the service call's error, then write its result. They take the call's
// two results directly (respond(w, …)(a.cp.Get(…))) so that a handler
// states only what differs — the call, the status and the view — and the
// error mapping and encoding live in one place (docs/api.md, "Errors").

// respond writes view(v) with status once the call that produced v has
// succeeded; a failed call's error goes to the error mapper unchanged.
func respond[T, V any](w http.ResponseWriter, status int, view func(T) V) func(T, error) error {
	return func(v T, err error) error {
		if err != nil {
			return err
		}
		writeJSON(w, status, view(v))
		return nil
	}
}

// respondRows writes 200 {key: [view(item)…]} once the list call has
// succeeded. Lists are always an array on the wire, never null, so clients
// can range over them without a nil check.
func respondRows[T, V any](w http.ResponseWriter, key string, view func(T) V) func([]T, error) error {
	return func(items []T, err error) error {
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{key: viewAll(items, view)})
		return nil
	}
}

// viewAll maps items to their wire views; the result is non-nil even for
// no items, so it encodes as [] rather than null.
func viewAll[T, V any](items []T, view func(T) V) []V {
	out := make([]V, 0, len(items))
	for _, it := range items {
		out = append(out, view(it))
	}
	return out
}

// noContent answers 204 for calls that return nothing on success, such as
// deletes.
func noContent(w http.ResponseWriter, err error) error {
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
