package e2b

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/platinum-dev/platinum/internal/compat/compatkit/compatfuzz"
	"github.com/platinum-dev/platinum/internal/fuzzkit"
)

// Fuzz targets for E2B's request decoders (the create body, the list
// query, envd's routing headers). Seeds are in testdata/fuzz/<target>.

// refusal fails t unless err is a client error with E2B's error shape.
func refusal(t *testing.T, what string, err error) {
	t.Helper()
	status, body, _ := errorStatus(err)
	if status < 400 || status >= 500 || body.Code != status || body.Message == "" {
		t.Fatalf("%s: %v became %d %+v, want a 4xx", what, err, status, body)
	}
}

// FuzzCreateBody: a create body decodes, or is refused with a 4xx;
// whatever decodes maps to a network policy without panicking.
func FuzzCreateBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		var n newSandbox
		r := httptest.NewRequest("POST", "http://ptd/v2/sandboxes", bytes.NewReader(body))
		err := decodeJSON(r, &n, false)
		if err == nil {
			err = n.unsupported()
		}
		if err == nil {
			_, err = timeout(n.Timeout, defaultTimeoutV2)
		}
		if err != nil {
			refusal(t, string(body), err)
			return
		}
		if p := n.networkPolicy(); p != nil && p.Egress == "" {
			t.Fatalf("%q: policy without egress", body)
		}
	})
}

// FuzzListQuery: a list query parses or is a 4xx; a parsed cursor prints
// back to one that parses to the same place.
func FuzzListQuery(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return // the server never sees it: net/http rejects the URL
		}
		lq, err := parseListQuery(q)
		if err != nil {
			refusal(t, raw, err)
			return
		}
		if lq.limit < 1 || lq.limit > maxListLimit {
			t.Fatalf("%q: limit %d", raw, lq.limit)
		}
		if lq.after != nil {
			back, err := parseCursor(lq.after.token())
			if err != nil || !back.at.Equal(lq.after.at) || back.id != lq.after.id {
				t.Fatalf("%q: cursor %+v printed back to %+v, %v", raw, lq.after, back, err)
			}
		}
	})
}

// FuzzEnvdHeaders: envd traffic is routed by E2b-Sandbox-Id,
// E2b-Sandbox-Port and X-Access-Token. With no such sandbox every request
// is refused with one of envd's answers (400 bad port, 401, 404 /init,
// 502 not running or not found), never a server error of ours, and with
// a Connect error body.
func FuzzEnvdHeaders(f *testing.F) {
	cp, tn := newBrokenService(f, brokenHost{startErr: errors.New("no")})
	h := New(cp, tn, DefaultConfig(), slog.New(slog.DiscardHandler))
	f.Fuzz(func(t *testing.T, method, path, id, port, token string) {
		if id == "" || !validHeader(id) || !validHeader(port) || !validHeader(token) || !validMethod(method) ||
			len(path) == 0 || path[0] != '/' {
			return // not a request net/http would hand us
		}
		u, err := url.Parse("http://ptd" + path)
		if err != nil {
			return
		}
		r := httptest.NewRequest(method, "http://ptd/", nil)
		r.URL = u
		r.Header.Set(headerSandboxID, id)
		if port != "" {
			r.Header.Set(headerSandboxPort, port)
		}
		if token != "" {
			r.Header.Set(headerAccessToken, token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		switch rec.Code {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusBadGateway:
		default:
			t.Fatalf("%s %s id=%q port=%q: %d %s", method, path, id, port, rec.Code, rec.Body)
		}
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["code"] == nil || body["message"] == nil {
			t.Fatalf("%s %s id=%q port=%q: %d body %q, want a Connect error", method, path, id, port, rec.Code, rec.Body)
		}
	})
}

// validMethod reports whether m is an HTTP token net/http would accept.
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// validHeader reports whether v can be a header value on the wire.
func validHeader(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// fuzzE2B fuzzes one route's JSON body through the E2B surface, holding
// the REST targets' properties in E2B's error shape (bad input is a 4xx
// whose body's code is the status).
func fuzzE2B(f *testing.F, method, route string) {
	compatfuzz.New(f, func(env *fuzzkit.Env) http.Handler {
		return New(env.CP, env.Tenancy, DefaultConfig(), slog.New(slog.DiscardHandler))
	}, compatfuzz.Surface{
		Auth: func(r *http.Request) { r.Header.Set(headerAPIKey, fuzzkit.Token) },
		Create: func(do func(method, target, body string) (int, []byte)) (string, error) {
			code, body := do("POST", "/v2/sandboxes", `{"templateID":"busybox","timeout":3600}`)
			var sb struct {
				SandboxID string `json:"sandboxID"`
			}
			if json.Unmarshal(body, &sb); code != http.StatusCreated || sb.SandboxID == "" {
				return "", fmt.Errorf("fixture sandbox: %d %s", code, body)
			}
			return sb.SandboxID, nil
		},
		BadBody: func(code int, answer []byte) string {
			var e errorBody
			if err := json.Unmarshal(answer, &e); err != nil || e.Code != code || e.Message == "" {
				return "want E2B's error body, its code the status"
			}
			return ""
		},
	}).Fuzz(f, method, route)
}

func FuzzE2BCreateV1(f *testing.F)    { fuzzE2B(f, "POST", "/sandboxes") }
func FuzzE2BCreateV2(f *testing.F)    { fuzzE2B(f, "POST", "/v2/sandboxes") }
func FuzzE2BTimeoutBody(f *testing.F) { fuzzE2B(f, "POST", "/sandboxes/{id}/timeout") }
func FuzzE2BRefreshBody(f *testing.F) { fuzzE2B(f, "POST", "/sandboxes/{id}/refreshes") }
func FuzzE2BPauseBody(f *testing.F)   { fuzzE2B(f, "POST", "/sandboxes/{id}/pause") }
func FuzzE2BResumeBody(f *testing.F)  { fuzzE2B(f, "POST", "/sandboxes/{id}/resume") }
func FuzzE2BConnectV1(f *testing.F)   { fuzzE2B(f, "POST", "/sandboxes/{id}/connect") }
func FuzzE2BConnectV2(f *testing.F)   { fuzzE2B(f, "POST", "/v2/sandboxes/{id}/connect") }
func FuzzE2BSnapshotBody(f *testing.F) {
	fuzzE2B(f, "POST", "/sandboxes/{id}/snapshots")
}
func FuzzE2BForkBody(f *testing.F)    { fuzzE2B(f, "POST", "/sandboxes/{id}/fork") }
func FuzzE2BNetworkBody(f *testing.F) { fuzzE2B(f, "PUT", "/sandboxes/{id}/network") }
