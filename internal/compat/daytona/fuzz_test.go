package daytona

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"testing"

	"github.com/platinum-dev/platinum/internal/compat/compatkit/compatfuzz"
	"github.com/platinum-dev/platinum/internal/fuzzkit"
)

// Fuzz targets for the request bodies Daytona's control-plane API decodes
// (create, resize, labels). Each input goes through the whole chain
// (routing, authentication, decoder, control plane, SQLite) and holds the
// REST targets' two properties in Daytona's error shape: no input is a
// server error (bad input is a 4xx whose statusCode is the status), and a
// refused request changes nothing in the store or on the host
// (docs/testing.md). Seeds are in testdata/fuzz/<target>.

// fuzzDaytona fuzzes one route's JSON body (under APIPrefix) through the
// Daytona surface.
func fuzzDaytona(f *testing.F, method, route string) {
	compatfuzz.New(f, func(env *fuzzkit.Env) http.Handler {
		return New(env.CP, env.Tenancy, DefaultConfig(), slog.New(slog.DiscardHandler))
	}, compatfuzz.Surface{
		Auth: func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+fuzzkit.Token) },
		Create: func(do func(method, target, body string) (int, []byte)) (string, error) {
			code, body := do("POST", APIPrefix+"/sandbox", `{"snapshot":"busybox"}`)
			var sb struct {
				ID    string `json:"id"`
				State string `json:"state"`
			}
			if json.Unmarshal(body, &sb); code != http.StatusOK || sb.State != "started" {
				return "", fmt.Errorf("fixture sandbox: %d %s", code, body)
			}
			return sb.ID, nil
		},
		BadBody: func(code int, answer []byte) string {
			var e errorBody
			if err := json.Unmarshal(answer, &e); err != nil || e.StatusCode != code || e.Message == "" {
				return "want Daytona's error body, its statusCode the status"
			}
			return ""
		},
	}).Fuzz(f, method, APIPrefix+route)
}

func FuzzDaytonaCreateBody(f *testing.F) { fuzzDaytona(f, "POST", "/sandbox") }
func FuzzDaytonaResizeBody(f *testing.F) { fuzzDaytona(f, "POST", "/sandbox/{id}/resize") }
func FuzzDaytonaLabelsBody(f *testing.F) { fuzzDaytona(f, "PUT", "/sandbox/{id}/labels") }
