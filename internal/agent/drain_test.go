package agent

import (
	"os"
	"testing"
	"time"
)

// TestPumpDrainsPastAnExpiredDeadline: output written before the process
// exited is delivered even when the pump reads only after the drain
// deadline passed (a goroutine scheduled late on a busy host), while the
// pipe stays open (a grandchild holding it) and the pump still returns.
func TestPumpDrainsPastAnExpiredDeadline(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	if _, err := w.WriteString("written before exit\n"); err != nil {
		t.Fatal(err)
	}
	if err := r.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	p := &proc{subs: map[*subscriber]struct{}{}}
	sub := p.subscribe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.pump(output{f: r, kind: outStdout})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("pump did not return with the pipe still open")
	}
	var got []byte
	for len(sub.ch) > 0 {
		ev := <-sub.ch
		got = append(got, ev.GetData().GetStdout()...)
	}
	if string(got) != "written before exit\n" {
		t.Errorf("pumped %q, want the buffered output", got)
	}
}
