// Package apicontract holds ptd's HTTP traffic to api/openapi.yaml, the
// source of truth of the REST API, in tests (docs/testing.md): a validating
// http.RoundTripper that checks every request and answer the tests make,
// and the route comparison of the router against the document.
//
// What it enforces, for each call to a registered API address:
//   - the answer's status is one the operation documents, and a JSON body
//     matches that status's schema (a field the code sends and the
//     document lacks fails, as the schemas close their objects);
//   - a request the document forbids (unknown field, wrong type, missing
//     parameter) is refused with a 4xx: a 2xx means the code accepts input
//     the document does not describe;
//   - a 2xx answer to a /v1 path the document has no operation for is drift.
//
// Streams (event streams, exec output, file bytes) are checked by status
// and media type only, so a test reading part of one does not hang.
package apicontract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/platinum-dev/platinum/api"
)

var (
	loadOnce sync.Once
	doc      *openapi3.T
	router   routers.Router
	loadErr  error
)

// Document loads, validates and indexes api/openapi.yaml once per process.
func Document() (*openapi3.T, routers.Router, error) {
	loadOnce.Do(func() {
		js, err := api.OpenAPIJSON()
		if err != nil {
			loadErr = err
			return
		}
		l := openapi3.NewLoader()
		d, err := l.LoadFromData(js)
		if err != nil {
			loadErr = fmt.Errorf("api/openapi.yaml: %w", err)
			return
		}
		if err := d.Validate(context.Background()); err != nil {
			loadErr = fmt.Errorf("api/openapi.yaml is not a valid document: %w", err)
			return
		}
		// Match paths on any address: tests serve on random ports.
		d.Servers = nil
		r, err := legacy.NewRouter(d)
		if err != nil {
			loadErr = fmt.Errorf("api/openapi.yaml routes: %w", err)
			return
		}
		doc, router = d, r
	})
	return doc, router, loadErr
}

// Operations lists every operation of the document as "METHOD /path".
func Operations() ([]string, error) {
	d, _, err := Document()
	if err != nil {
		return nil, err
	}
	var out []string
	for path, item := range d.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(out)
	return out, nil
}

var (
	mu         sync.Mutex
	hosts      = map[string]int{} // host:port -> registrations
	violations []string
)

// Register marks base (an API base URL) as ptd's, so Transport validates
// calls to it; the returned function forgets it.
func Register(base string) (unregister func()) {
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	mu.Lock()
	hosts[u.Host]++
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if hosts[u.Host]--; hosts[u.Host] <= 0 {
			delete(hosts, u.Host)
		}
	}
}

func registered(host string) bool {
	mu.Lock()
	defer mu.Unlock()
	return hosts[host] > 0
}

// Violations returns every contract violation seen so far in this process
// (a test binary's TestMain fails the run on any, in case a test dropped
// the error its client returned).
func Violations() []string {
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(violations)
}

var installOnce sync.Once

// Install wraps http.DefaultTransport (used by http.DefaultClient and every
// client without a transport of its own, the SDK's included) in Transport.
func Install() {
	installOnce.Do(func() { http.DefaultTransport = Transport(http.DefaultTransport) })
}

// Transport validates the calls base makes to registered addresses.
func Transport(base http.RoundTripper) http.RoundTripper {
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

// ViolationError is a call that broke the contract. The client gets it
// instead of the answer.
type ViolationError struct {
	Method, Path string
	Status       int
	Problems     []string
}

func (e *ViolationError) Error() string {
	return fmt.Sprintf("api/openapi.yaml contract: %s %s -> %d: %s", e.Method, e.Path, e.Status, strings.Join(e.Problems, "; "))
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !registered(req.URL.Host) || !inContract(req) {
		return t.base.RoundTrip(req)
	}
	_, rt, err := Document()
	if err != nil {
		return nil, err
	}
	route, params, ferr := rt.FindRoute(req)
	if ferr != nil {
		resp, err := t.base.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		var problems []string
		if resp.StatusCode < 300 && strings.HasPrefix(req.URL.Path, "/v1/") {
			problems = append(problems, "a 2xx answer to a path and method the document has no operation for")
		}
		return t.verdict(req, resp, problems)
	}
	// Only a JSON body is read (and so buffered): an upload streams
	// through untouched, as the server reads it.
	var reqBody []byte
	if req.Body != nil && req.Body != http.NoBody && takesJSON(route.Operation) && isJSON(req.Header.Get("Content-Type"), true) {
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(reqBody)), nil }
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	var problems []string
	checked := withoutIdempotencyKey(reqBody)
	if optionalBody(route.Operation) && strings.TrimSpace(string(checked)) == "null" {
		checked = nil // an optional body may be null: ptd reads it as absent
	}
	in := &openapi3filter.RequestValidationInput{
		Request: withBody(req, checked), PathParams: params, Route: route,
		Options: &openapi3filter.Options{
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
			MultiError:         true,
			// Non-JSON bodies (file uploads) are bytes: nothing to check.
			ExcludeRequestBody: checked == nil,
		},
	}
	reqErr := openapi3filter.ValidateRequest(req.Context(), in)
	if reqErr != nil && resp.StatusCode < 400 {
		problems = append(problems, "accepted a request the document forbids: "+oneLine(reqErr))
	}
	ct := resp.Header.Get("Content-Type")
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, ExcludeResponseBody: true},
	}
	if isJSON(ct, false) && req.Method != http.MethodHead {
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		out.SetBodyBytes(body)
		out.Options.ExcludeResponseBody = false
		var v any
		if json.Unmarshal(body, &v) == nil {
			var extra []string
			undeclared(responseSchema(route.Operation, resp.StatusCode), v, "$", &extra)
			if len(extra) > 0 {
				problems = append(problems, "answer has fields the document does not declare: "+strings.Join(extra, ", "))
			}
		}
	} else if ct != "" && !mediaTypeDocumented(route.Operation, resp.StatusCode, ct) {
		problems = append(problems, fmt.Sprintf("answered with Content-Type %q, which the document does not list for %d", ct, resp.StatusCode))
	}
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		problems = append(problems, "answer: "+oneLine(err))
	}
	return t.verdict(req, resp, problems)
}

// verdict records problems and returns them as the call's error.
func (t *transport) verdict(req *http.Request, resp *http.Response, problems []string) (*http.Response, error) {
	if len(problems) == 0 {
		return resp, nil
	}
	resp.Body.Close()
	e := &ViolationError{Method: req.Method, Path: req.URL.Path, Status: resp.StatusCode, Problems: problems}
	mu.Lock()
	violations = append(violations, e.Error())
	mu.Unlock()
	return nil, e
}

// inContract reports whether req belongs to the native API. E2B's surface
// (envd traffic naming a sandbox in E2b-Sandbox-Id, and E2B's own paths,
// none under /v1) has its own contract, held by the real e2b SDK's tests.
func inContract(req *http.Request) bool {
	if req.Header.Get("E2b-Sandbox-Id") != "" {
		return false
	}
	p := req.URL.Path
	return strings.HasPrefix(p, "/v1/") || p == "/healthz" || p == "/metrics" || p == "/api/sandbox/status"
}

// takesJSON reports whether op's request body may be JSON.
func takesJSON(op *openapi3.Operation) bool {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return true // a body the document does not expect: check it as JSON
	}
	for mt := range op.RequestBody.Value.Content {
		if isJSON(mt, false) {
			return true
		}
	}
	return false
}

// withoutIdempotencyKey drops the idempotency_key (or idempotencyKey)
// field of a JSON object body, as the server's idempotency layer does
// before any handler decodes it (the document's IdempotencyKey parameter).
func withoutIdempotencyKey(body []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return body
	}
	_, a := m["idempotency_key"]
	_, b := m["idempotencyKey"]
	if !a && !b {
		return body
	}
	delete(m, "idempotency_key")
	delete(m, "idempotencyKey")
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// optionalBody reports whether op's request body may be left out.
func optionalBody(op *openapi3.Operation) bool {
	return op.RequestBody == nil || op.RequestBody.Value == nil || !op.RequestBody.Value.Required
}

// withBody is a copy of req to validate, with body (none when nil: the
// real one may be streaming to the server).
func withBody(req *http.Request, body []byte) *http.Request {
	r := req.Clone(req.Context())
	if body == nil {
		r.Body, r.GetBody, r.ContentLength = http.NoBody, nil, 0
		return r
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.ContentLength = int64(len(body))
	if r.Header.Get("Content-Type") == "" {
		r.Header.Set("Content-Type", "application/json") // ptd reads an untyped body as JSON
	}
	return r
}

// isJSON reports whether a media type is JSON; an absent one counts for a
// request (curl -d sends none, and ptd reads JSON).
func isJSON(ct string, emptyIsJSON bool) bool {
	if ct == "" {
		return emptyIsJSON
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// mediaTypeDocumented reports whether op's answer for status lists ct.
func mediaTypeDocumented(op *openapi3.Operation, status int, ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	ref := op.Responses.Status(status)
	if ref == nil {
		ref = op.Responses.Default()
	}
	if ref == nil || ref.Value == nil {
		return true // the status check reports it
	}
	if len(ref.Value.Content) == 0 {
		return true
	}
	for k := range ref.Value.Content {
		if k == mt || k == "*/*" || (strings.HasSuffix(k, "/*") && strings.HasPrefix(mt, strings.TrimSuffix(k, "*"))) {
			return true
		}
	}
	return false
}

func oneLine(err error) string {
	var me openapi3.MultiError
	if errors.As(err, &me) {
		var parts []string
		for _, e := range me {
			parts = append(parts, oneLine(e))
		}
		return strings.Join(parts, " | ")
	}
	s := err.Error()
	if i := strings.Index(s, "\nSchema:"); i >= 0 {
		s = s[:i]
	}
	return strings.Join(strings.Fields(s), " ")
}
