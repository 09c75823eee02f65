package benchkit

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestNodeDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "node_modules", "@scope", "sdk"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		module string
		ok     bool
	}{
		{filepath.Join("@scope", "sdk"), true},
		{"e2b", false},
	} {
		got, err := NodeDir(dir, tc.module)
		if tc.ok && (err != nil || got != dir) {
			t.Errorf("NodeDir(%s) = %q, %v; want %q", tc.module, got, err, dir)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "npm ci")) {
			t.Errorf("NodeDir(%s) = %q, %v; want the npm ci error", tc.module, got, err)
		}
	}
}

func TestPipes(t *testing.T) {
	cmd := exec.Command("cat")
	in, out, err := Pipes(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in.Write([]byte("ping\n"))
	line, err := bufio.NewReader(out).ReadString('\n')
	in.Close()
	cmd.Wait()
	if line != "ping\n" || err != nil {
		t.Errorf("read %q, %v; want ping", line, err)
	}
}
