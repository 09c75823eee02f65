package controlplane

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestWaitCodeKernel: the warm pools' wait for a code-interpreter
// sandbox's default kernel asks nothing of another template's sandbox,
// asks again while the server is not up yet, returns only once the
// server answers /health?kernel=python, and fails on the server's error
// or when the wait is given up.
func TestWaitCodeKernel(t *testing.T) {
	s := &Service{}
	ctx := context.Background()
	if err := s.WaitCodeKernel(ctx, sandbox.Sandbox{Template: "busybox", Address: "127.0.0.1"}); err != nil {
		t.Fatalf("busybox sandbox: %v, want no wait", err)
	}

	// A loopback address of this test's own, so port 49999 is free.
	const addr = "127.77.0.9"
	sb := sandbox.Sandbox{ID: "sbx_k", Template: CodeInterpreterTemplate, Address: addr}
	release := make(chan struct{})
	var status atomic.Int32
	status.Store(http.StatusOK)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" || r.URL.Query().Get("kernel") != "python" {
			t.Errorf("asked %s, want /health?kernel=python", r.URL)
		}
		<-release // the kernel is starting
		w.WriteHeader(int(status.Load()))
	})}
	t.Cleanup(func() { srv.Close() })

	done := make(chan error, 1)
	go func() { done <- s.WaitCodeKernel(ctx, sb) }()
	time.Sleep(300 * time.Millisecond) // refused: not listening yet
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(CodeInterpreterPort)))
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	select {
	case err := <-done:
		t.Fatalf("returned %v before the kernel was up", err)
	case <-time.After(500 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("kernel up: %v", err)
	}

	status.Store(http.StatusInternalServerError)
	if err := s.WaitCodeKernel(ctx, sb); err == nil {
		t.Fatal("the server's 500 (kernel start failed): no error")
	}
	srv.Close()
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := s.WaitCodeKernel(cctx, sb); err == nil {
		t.Fatal("no server and the wait given up: no error")
	}
}
