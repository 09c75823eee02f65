package agentclient_test

import (
	"errors"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/agentclient"
)

// TestAbortEndsCallsInFlight: Abort ends an exec in flight at once with
// the cause it is given (a sandbox killed outright never answers, nor
// closes its connections), and every later call fails with it too.
func TestAbortEndsCallsInFlight(t *testing.T) {
	ctx := testCtx(t)
	c := agentclient.NewOwnPool(startAgent(t), token)
	cause := errors.New("the sandbox was ended")
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, agentclient.ExecRequest{Cmd: "sleep", Args: []string{"30"}, OnStart: func(uint32) { close(started) }}, nil, nil)
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("exec ended before it started: %v", err)
	}
	t0 := time.Now()
	c.Abort(cause)
	select {
	case err := <-done:
		if !errors.Is(err, cause) {
			t.Errorf("exec after Abort: %v; want the cause", err)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Errorf("exec ended %v after Abort", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("exec still running 10 s after Abort")
	}
	if err := c.Health(ctx); !errors.Is(err, cause) {
		t.Errorf("a call after Abort: %v; want the cause", err)
	}
}
