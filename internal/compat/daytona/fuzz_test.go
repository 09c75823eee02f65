package daytona

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/fuzzkit"
)

// Fuzz targets for the request bodies Daytona's control-plane API decodes
// (create, resize, labels). Each input goes through the whole chain
// (routing, authentication, decoder, control plane, SQLite) and holds the
// REST targets' two properties in Daytona's error shape: no input is a
// server error (bad input is a 4xx whose statusCode is the status), and a
// refused request changes nothing in the store or on the host
// (docs/testing.md). Seeds are in testdata/fuzz/<target>.

// daytonaServer is the Daytona surface over a fuzzkit.Env, with one
// started sandbox made through it (id).
type daytonaServer struct {
	*fuzzkit.Env
	h  *Handler
	id string
}

func newDaytonaServer(f *testing.F) *daytonaServer {
	f.Helper()
	env := fuzzkit.New(f)
	s := &daytonaServer{Env: env, h: New(env.CP, env.Tenancy, DefaultConfig(), slog.New(slog.DiscardHandler))}
	if err := s.fresh(); err != nil {
		f.Fatal(err)
	}
	return s
}

// fresh makes a new started sandbox the fixture.
func (s *daytonaServer) fresh() error {
	code, body := s.do("POST", APIPrefix+"/sandbox", `{"snapshot":"busybox"}`)
	var sb struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	if json.Unmarshal(body, &sb); code != http.StatusOK || sb.State != "started" {
		return fmt.Errorf("fixture sandbox: %d %s", code, body)
	}
	s.id = sb.ID
	return nil
}

func (s *daytonaServer) do(method, target, body string) (int, []byte) {
	r := httptest.NewRequest(method, "http://ptd"+target, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+fuzzkit.Token)
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, r)
	return rec.Code, rec.Body.Bytes()
}

func fuzzDaytona(f *testing.F, method, route string) {
	s := newDaytonaServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		if !s.Running(t, s.id) {
			if err := s.fresh(); err != nil {
				t.Fatal(err)
			}
			s.Settle(t)
		}
		target := APIPrefix + strings.ReplaceAll(route, "{id}", s.id)
		s.Check(t, fmt.Sprintf("%s %s %q", method, target, body), func() (int, []byte) { return s.do(method, target, string(body)) },
			func(code int, answer []byte) string {
				var e errorBody
				if err := json.Unmarshal(answer, &e); err != nil || e.StatusCode != code || e.Message == "" {
					return "want Daytona's error body, its statusCode the status"
				}
				return ""
			})
	})
}

func FuzzDaytonaCreateBody(f *testing.F) { fuzzDaytona(f, "POST", "/sandbox") }
func FuzzDaytonaResizeBody(f *testing.F) { fuzzDaytona(f, "POST", "/sandbox/{id}/resize") }
func FuzzDaytonaLabelsBody(f *testing.F) { fuzzDaytona(f, "PUT", "/sandbox/{id}/labels") }
