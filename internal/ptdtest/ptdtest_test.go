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

// TestMainBuildOutlivesMain: the build Main's daemon made serves the
// package's other daemons and stays until the last of them stops, also
// one that stops after Main's daemon (whose reset needs ptd).
func TestMainBuildOutlivesMain(t *testing.T) {
	dir := t.TempDir() + "/bin"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	builds.Lock()
	builds.users[dir] = 1 // Main's daemon
	mainBin = dir
	builds.Unlock()
	t.Cleanup(func() {
		builds.Lock()
		mainBin = ""
		builds.Unlock()
	})

	other, shared := takeBuild()
	if other != dir || !shared {
		t.Fatalf("takeBuild = %q %v, want Main's build shared", other, shared)
	}
	dropBuild(dir) // Main's daemon stops first
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("Main's daemon's stop removed the build another daemon still uses: %v", err)
	}
	dropBuild(dir) // the other one
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the last stop left the build: %v", err)
	}
	if _, shared := takeBuild(); shared {
		t.Fatal("takeBuild handed out a removed build")
	}
}
