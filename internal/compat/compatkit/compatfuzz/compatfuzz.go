// Package compatfuzz is the harness the E2B and Daytona layers' body fuzz
// targets share: a layer's handler over a fuzzkit.Env, with one running
// sandbox made through it as the fixture. Each input goes through the
// whole chain (routing, authentication, decoder, control plane, SQLite)
// and holds the REST targets' two properties in the layer's own error
// shape: no input is a server error, and a refused request changes nothing
// in the store or on the host (docs/testing.md). Only tests import it.
package compatfuzz

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/fuzzkit"
)

// Surface is what one layer's targets differ in.
type Surface struct {
	// Auth sets the fuzzkit token as the layer's API key on r.
	Auth func(r *http.Request)
	// Create makes a fixture sandbox with do and returns its id.
	Create func(do func(method, target, body string) (int, []byte)) (string, error)
	// BadBody says what is wrong with an error answer's body, "" when it
	// is the layer's error shape for status.
	BadBody func(status int, body []byte) string
}

// Server is a layer's handler over a fuzzkit.Env, and its fixture
// sandbox.
type Server struct {
	*fuzzkit.Env
	h       http.Handler
	surface Surface
	id      string
}

// New builds the environment, the handler newHandler makes over it and
// the first fixture sandbox.
func New(f *testing.F, newHandler func(env *fuzzkit.Env) http.Handler, surface Surface) *Server {
	f.Helper()
	env := fuzzkit.New(f)
	s := &Server{Env: env, h: newHandler(env), surface: surface}
	if err := s.fresh(); err != nil {
		f.Fatal(err)
	}
	return s
}

// fresh makes a new fixture sandbox.
func (s *Server) fresh() error {
	id, err := s.surface.Create(s.do)
	if err != nil {
		return err
	}
	s.id = id
	return nil
}

func (s *Server) do(method, target, body string) (int, []byte) {
	r := httptest.NewRequest(method, "http://ptd"+target, strings.NewReader(body))
	s.surface.Auth(r)
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, r)
	return rec.Code, rec.Body.Bytes()
}

// Fuzz fuzzes the JSON body of method target ({id} is the fixture
// sandbox, made again when an accepted input ended it).
func (s *Server) Fuzz(f *testing.F, method, target string) {
	f.Fuzz(func(t *testing.T, body []byte) {
		if !s.Running(t, s.id) { // an accepted stop, pause or kill ends it
			if err := s.fresh(); err != nil {
				t.Fatal(err)
			}
			s.Settle(t)
		}
		target := strings.ReplaceAll(target, "{id}", s.id)
		s.Check(t, fmt.Sprintf("%s %s %q", method, target, body), func() (int, []byte) { return s.do(method, target, string(body)) }, s.surface.BadBody)
	})
}
