package remote

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Prefix is where ptd mounts the handler on its API listener; every path
// of the protocol is under it: Prefix+<Method> for a store call,
// Prefix+"_events" for the commit stream, Prefix itself for Dial's check.
const Prefix = "/_pt/store/"

// eventsPath is the commit stream's path under Prefix (a name no store
// method can have).
const eventsPath = "_events"

// byHand are the store methods the table does not carry as they are: a
// closure (ModifySandbox), a held lock (LockKey) and the client's own
// Close. client.go and handler.go carry them.
var byHand = map[string]bool{"ModifySandbox": true, "LockKey": true, "Close": true}

// method is one store method as the wire carries it.
type method struct {
	name     string
	index    int            // in store.Store's method set
	in       []reflect.Type // the parameters after ctx
	out      []reflect.Type // the results before the error
	variadic bool
}

var ctxType = reflect.TypeFor[context.Context]()

// methods is store.Store's method set by name, the by-hand ones left out.
// It is built once; a method the wire cannot carry panics at init, so a
// store change that needs new handling is found by any test.
var methods = func() map[string]*method {
	st := reflect.TypeFor[store.Store]()
	out := map[string]*method{}
	for i := range st.NumMethod() {
		m := st.Method(i)
		if byHand[m.Name] {
			continue
		}
		ft := m.Type
		if ft.NumIn() == 0 || ft.In(0) != ctxType || ft.NumOut() == 0 || ft.Out(ft.NumOut()-1) != errorType {
			panic("remote: store method " + m.Name + " is not (ctx, …) (…, error): carry it by hand")
		}
		mt := &method{name: m.Name, index: i, variadic: ft.IsVariadic()}
		for j := 1; j < ft.NumIn(); j++ {
			mt.in = append(mt.in, ft.In(j))
		}
		for j := 0; j < ft.NumOut()-1; j++ {
			mt.out = append(mt.out, ft.Out(j))
		}
		for _, t := range append(append([]reflect.Type{}, mt.in...), mt.out...) {
			if !carried(t, map[reflect.Type]bool{}) {
				panic("remote: store method " + m.Name + " has a " + t.String() + ", which cannot go over the wire: carry it by hand")
			}
		}
		out[m.Name] = mt
	}
	return out
}()

// contract fingerprints the method table (names and types, by-hand
// methods included), so that Dial can tell a server of another ptd
// version.
var contract = func() string {
	st := reflect.TypeFor[store.Store]()
	h := sha256.New()
	for i := range st.NumMethod() {
		fmt.Fprintf(h, "%s %s\n", st.Method(i).Name, st.Method(i).Type)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}()

// ping is the answer to Dial's check.
type ping struct {
	Contract string `json:"contract"`
}

// carried reports whether values of t can go over the wire.
func carried(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] || t == timeType {
		return true
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Func, reflect.Chan, reflect.UnsafePointer, reflect.Complex64, reflect.Complex128, reflect.Uintptr:
		return false
	case reflect.Interface:
		return t == errorType || t.NumMethod() == 0
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return carried(t.Elem(), seen)
	case reflect.Map:
		switch t.Key().Kind() {
		case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		default:
			return false
		}
		return carried(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && !carried(f.Type, seen) {
				return false
			}
		}
	}
	return true
}

// wireError is an error as the wire carries it: a stable code and the
// error's message.
type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// answer is the body of every store call's response.
type answer struct {
	Results []any      `json:"results,omitempty"`
	Error   *wireError `json:"error,omitempty"`
}

// Codes of errors that are not a category of the store's.
const (
	codeInternal      = "internal"       // any other error of the store
	codeUnknownMethod = "unknown_method" // the server has no such method
	codeBadCall       = "bad_call"       // arguments the server could not read
	codeNoCommits     = "no_commits"     // the server has no listen function
)

// categories are the error categories the wire keeps, by code: the
// sandbox categories every store error wraps, and a context's end. The
// first that matches names an error.
var categories = []struct {
	code   string
	err    error
	status int
}{
	{"not_found", sandbox.ErrNotFound, http.StatusNotFound},
	{"already_exists", sandbox.ErrAlreadyExists, http.StatusConflict},
	{"conflict", sandbox.ErrConflict, http.StatusConflict},
	{"invalid_argument", sandbox.ErrInvalidArgument, http.StatusBadRequest},
	{"quota_exceeded", sandbox.ErrQuotaExceeded, http.StatusTooManyRequests},
	{"unauthenticated", sandbox.ErrUnauthenticated, http.StatusUnauthorized},
	{"forbidden", sandbox.ErrForbidden, http.StatusForbidden},
	{"unavailable", sandbox.ErrUnavailable, http.StatusServiceUnavailable},
	{"canceled", context.Canceled, 499}, // the client went away
	{"deadline_exceeded", context.DeadlineExceeded, http.StatusGatewayTimeout},
}

// toWire is err's code, message and HTTP status.
func toWire(err error) (*wireError, int) {
	for _, c := range categories {
		if errors.Is(err, c.err) {
			return &wireError{Code: c.code, Message: err.Error()}, c.status
		}
	}
	return &wireError{Code: codeInternal, Message: err.Error()}, http.StatusInternalServerError
}

// remoteError is an error the server's store returned: its message as
// the server wrote it, wrapping the category its code names (nil for
// codeInternal), so callers' errors.Is checks hold as with a local store.
type remoteError struct {
	code string
	msg  string
	cat  error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.cat }

// fromWire is the error the client returns for w.
func fromWire(w *wireError) error {
	for _, c := range categories {
		if c.code == w.Code {
			return &remoteError{code: w.Code, msg: w.Message, cat: c.err}
		}
	}
	return &remoteError{code: w.Code, msg: w.Message}
}
