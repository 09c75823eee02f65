package controlplane

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestAgentPoolPerSandbox: the agent clients of two sandboxes that got
// the same address one after the other never share a kept connection
// (the second sandbox's agent would reset one kept to the first's, and a
// request that cannot be retried failed), and forgetting a sandbox closes
// its kept connections.
func TestAgentPoolPerSandbox(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	// An agent stand-in on a loopback address of its own, at AgentPort.
	addr := fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(250)+1, rand.IntN(250)+1)
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(AgentPort)))
	if err != nil {
		t.Fatal(err)
	}
	var opened, closed atomic.Int32
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				opened.Add(1)
			case http.StateClosed:
				closed.Add(1)
			}
		},
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	ctx := context.Background()
	for i, id := range []string{"sbx_first", "sbx_first", "sbx_second"} {
		if err := s.agent(id, addr, "tok").Health(ctx); err != nil {
			t.Fatalf("health %d (%s): %v", i, id, err)
		}
	}
	if n := opened.Load(); n != 2 {
		t.Errorf("connections opened for two sandboxes at one address: %d, want 2 (one each; the first's is reused by its own second call)", n)
	}
	s.forgetAgent("sbx_first")
	s.forgetAgent("sbx_second")
	// The server sees the closes shortly after: poll for them.
	for end := time.Now().Add(10 * time.Second); closed.Load() < 2 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if n := closed.Load(); n != 2 {
		t.Errorf("kept connections closed after forgetAgent: %d, want 2", n)
	}
}
