package agent_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/agent"
	"github.com/platinum-dev/platinum/internal/agentclient"
)

// TestCodeReady: GET /code/ready (what a warm pool asks before it hands a
// sandbox out) answers at once without a code interpreter, waits while the
// server's default kernel starts (/health?kernel=python) and answers once
// it is up, and fails when the server says the kernel did not start.
func TestCodeReady(t *testing.T) {
	ctx := testCtx(t)
	plain := newEnvWith(t, nil)
	if err := agentclient.New(plain.ts.URL, testToken, nil).CodeReady(ctx); err != nil {
		t.Fatalf("no code interpreter: %v, want ready at once", err)
	}

	release := make(chan struct{})
	var status atomic.Int32
	status.Store(http.StatusOK)
	cs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" || r.URL.Query().Get("kernel") != "python" {
			t.Errorf("the server was asked %s, want /health?kernel=python", r.URL)
		}
		<-release // the kernel is starting
		w.WriteHeader(int(status.Load()))
	}))
	t.Cleanup(cs.Close)
	e := newEnvWith(t, func(c *agent.Config) { c.CodeInterpreter = cs.URL })
	c := agentclient.New(e.ts.URL, testToken, nil)
	done := make(chan error, 1)
	go func() { done <- c.CodeReady(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("answered %v while the kernel was starting", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("kernel up: %v", err)
	}
	status.Store(http.StatusInternalServerError)
	if err := c.CodeReady(ctx); err == nil {
		t.Fatal("the kernel did not start (the server's 500): no error")
	}
}
