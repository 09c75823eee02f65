// Package agenttest serves an in-process pt-agent for tests: the agent's
// own and those of its clients.
package agenttest

import (
	"net/http"
	"net/http/httptest"
	"os/user"
	"testing"

	"github.com/platinum-dev/platinum/internal/agent"
)

// Serve starts the agent cfg describes on a test server that speaks
// HTTP/1.1 and h2c, as cmd/pt-agent's listener does, so that tests see the
// protocols a sandbox's agent offers. When the test ends the agent closes
// first (it kills its processes, so open streams end) and then the server.
func Serve(t testing.TB, cfg agent.Config) (*agent.Server, *httptest.Server) {
	t.Helper()
	srv, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.Protocols = new(http.Protocols)
	ts.Config.Protocols.SetHTTP1(true)
	ts.Config.Protocols.SetUnencryptedHTTP2(true)
	ts.Start()
	t.Cleanup(func() {
		srv.Close()
		ts.CloseClientConnections()
		ts.Close()
	})
	return srv, ts
}

// CurrentUser names the user running the tests, so that processes start
// without a uid switch when the tests do not run as root.
func CurrentUser(t testing.TB) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}
