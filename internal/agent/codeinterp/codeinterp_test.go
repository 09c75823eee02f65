package codeinterp

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestInstallWritesTheSources: the server and the JavaScript REPL land in
// the directory byte for byte (pt-agent runs them from there).
func TestInstallWritesTheSources(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ci")
	if err := Install(dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{"server.py": serverPy, "repl.js": replJS} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) || len(want) == 0 {
			t.Errorf("%s: %d bytes, want %d (%v)", name, len(got), len(want), err)
		}
	}
}
