package ptdtest

import (
	"net"
	"os"
	"os/exec"
	"testing"
)

// TestPanicOrTail: a log with a panic is shown from the panic's line, one
// without by its tail.
func TestPanicOrTail(t *testing.T) {
	for _, tc := range []struct{ log, want string }{
		{"a\nb\nc\nd", "c\nd"},
		{"a\nb\n2026/12/05 http: panic serving 1.2.3.4: boom\ngoroutine 1\nx\ny", "2026/12/05 http: panic serving 1.2.3.4: boom\ngoroutine 1"},
		{"a\npanic: boom\n\ngoroutine 1", "panic: boom\n"},
	} {
		if got := PanicOrTail(tc.log, 2); got != tc.want {
			t.Errorf("PanicOrTail(%q) = %q, want %q", tc.log, got, tc.want)
		}
	}
}

// TestListensOn: the kernel's tables name the process whose socket
// listens on a port: this test's own listener is its own, not a child's;
// a port nothing listens on is unknown.
func TestListensOn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	if own, known := listensOn(os.Getpid(), port); !own || !known {
		t.Errorf("this process's listener: own %v known %v, want both", own, known)
	}
	if own, known := listensOn(child.Process.Pid, port); own || !known {
		t.Errorf("a child's view of it: own %v known %v, want not own, known", own, known)
	}
	ln.Close()
	if _, known := listensOn(os.Getpid(), port); known {
		t.Errorf("a closed port is known")
	}
}
