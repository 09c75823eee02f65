package network

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRaiseNeighTable: the neighbour table's thresholds are raised to
// neighTable's, one already larger is left as it is, and a missing file is
// an error (the caller warns).
func TestRaiseNeighTable(t *testing.T) {
	dir := t.TempDir()
	start := map[string]string{"gc_thresh1": "128", "gc_thresh2": "512", "gc_thresh3": "99999"}
	for name, v := range start {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := raiseNeighTable(dir); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"gc_thresh1": "2048", "gc_thresh2": "8192", "gc_thresh3": "99999"}
	for name, w := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != w {
			t.Errorf("%s = %s, want %s", name, got, w)
		}
	}
	if err := raiseNeighTable(filepath.Join(dir, "missing")); err == nil {
		t.Error("raiseNeighTable of a missing dir = nil, want an error")
	}
}
