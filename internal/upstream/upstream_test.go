package upstream

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestHost: pools are one per sandbox, boot and address, so a connection
// kept to one sandbox is never sent to another that got its address
// later, nor to the same sandbox after it started again; the name dials
// that address.
func TestHost(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	abc := sandbox.Sandbox{ID: "sbx_01ABC", CreatedAt: t0}
	restarted := abc
	restarted.LastStart = &sandbox.LastStart{At: t0.Add(time.Minute)}
	a := Host(abc, "100.71.160.7:49983")
	names := []string{a,
		Host(sandbox.Sandbox{ID: "sbx_01DEF", CreatedAt: t0}, "100.71.160.7:49983"),
		Host(abc, "100.71.160.8:49983"),
		Host(restarted, "100.71.160.7:49983"),
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Fatalf("pools shared: %v", names)
		}
		seen[n] = true
	}
	for _, c := range []struct{ in, want string }{
		{a, "100.71.160.7:49983"},
		{names[3], "100.71.160.7:49983"},
		{Host(abc, "[fd00::5]:49983"), "[fd00::5]:49983"},
		{"10.0.0.1:80", "10.0.0.1:80"},
	} {
		if got, err := Addr(c.in); err != nil || got != c.want {
			t.Errorf("Addr(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := Addr("azz.sbx-1-0.sandbox:1"); err == nil {
		t.Errorf("a malformed pool name was dialled")
	}
}

// TestAbort: Abort ends the reads in flight on every connection Dial made
// to that sandbox (a sandbox killed outright never closes them), leaves
// another sandbox's alone, and a closed connection is forgotten.
func TestAbort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() }) // never writes: a vanished peer
		}
	}()
	dial := Dial(&net.Dialer{})
	t0 := time.Unix(1_700_000_000, 0)
	doomed := sandbox.Sandbox{ID: "sbx_01ABC", CreatedAt: t0}
	other := sandbox.Sandbox{ID: "sbx_01ABD", CreatedAt: t0}
	read := func(sb sandbox.Sandbox) (net.Conn, chan error) {
		c, err := dial(context.Background(), "tcp", Host(sb, ln.Addr().String()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		done := make(chan error, 1)
		go func() { _, err := c.Read(make([]byte, 1)); done <- err }()
		return c, done
	}
	_, a := read(doomed)
	_, b := read(doomed)
	otherConn, c := read(other)
	Abort(doomed.ID)
	for _, done := range []chan error{a, b} {
		select {
		case err := <-done:
			if err == nil {
				t.Error("a read ended by Abort returned no error")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a read to the aborted sandbox still waits 5 s after Abort")
		}
	}
	select {
	case err := <-c:
		t.Fatalf("Abort of one sandbox ended a read to another: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	otherConn.Close()
	<-c
	registry.Lock()
	defer registry.Unlock()
	if len(registry.by) != 0 {
		t.Errorf("connections still recorded after they were closed or aborted: %v", registry.by)
	}
}
