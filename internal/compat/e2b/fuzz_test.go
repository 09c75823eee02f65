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
	"strings"
	"testing"

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

// e2bServer is the E2B surface over a fuzzkit.Env, with one running
// sandbox made through it (id). Its targets send each input through the
// whole chain (routing, authentication, decoder, control plane, SQLite)
// and hold the REST targets' two properties in E2B's error shape: no input
// is a server error (bad input is a 4xx whose body's code is the status),
// and a refused request changes nothing in the store or on the host.
type e2bServer struct {
	*fuzzkit.Env
	h  *Handler
	id string
}

func newE2BServer(f *testing.F) *e2bServer {
	f.Helper()
	env := fuzzkit.New(f)
	s := &e2bServer{Env: env, h: New(env.CP, env.Tenancy, DefaultConfig(), slog.New(slog.DiscardHandler))}
	if err := s.fresh(); err != nil {
		f.Fatal(err)
	}
	return s
}

// fresh makes a new running sandbox the fixture.
func (s *e2bServer) fresh() error {
	code, body := s.do("POST", "/v2/sandboxes", `{"templateID":"busybox","timeout":3600}`)
	var sb struct {
		SandboxID string `json:"sandboxID"`
	}
	if json.Unmarshal(body, &sb); code != http.StatusCreated || sb.SandboxID == "" {
		return fmt.Errorf("fixture sandbox: %d %s", code, body)
	}
	s.id = sb.SandboxID
	return nil
}

func (s *e2bServer) do(method, target, body string) (int, []byte) {
	r := httptest.NewRequest(method, "http://ptd"+target, strings.NewReader(body))
	r.Header.Set(headerAPIKey, fuzzkit.Token)
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, r)
	return rec.Code, rec.Body.Bytes()
}

// check sends one fuzzed body to route ({id} is the fixture sandbox) and
// holds the two properties.
func (s *e2bServer) check(t *testing.T, method, route string, body []byte) {
	t.Helper()
	if !s.Running(t, s.id) { // an accepted pause or kill ends it
		if err := s.fresh(); err != nil {
			t.Fatal(err)
		}
		s.Settle(t)
	}
	target := strings.ReplaceAll(route, "{id}", s.id)
	s.Check(t, fmt.Sprintf("%s %s %q", method, target, body), func() (int, []byte) { return s.do(method, target, string(body)) },
		func(code int, answer []byte) string {
			var e errorBody
			if err := json.Unmarshal(answer, &e); err != nil || e.Code != code || e.Message == "" {
				return "want E2B's error body, its code the status"
			}
			return ""
		})
}

// fuzzE2B fuzzes one route's JSON body.
func fuzzE2B(f *testing.F, method, route string) {
	s := newE2BServer(f)
	f.Fuzz(func(t *testing.T, body []byte) { s.check(t, method, route, body) })
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
