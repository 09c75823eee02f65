package oci

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPauseRetriesUnableToFreeze: a freeze runc gave up on ("unable to
// freeze", the cgroup v1 freezer on a busy host) is tried again, up to
// pauseAttempts in all; any other failure is returned at once. The runtime
// is a script that fails its first calls the way runc does.
func TestPauseRetriesUnableToFreeze(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fails     int
		msg       string
		wantErr   string
		wantCalls int
	}{
		{"freezes at once", 0, "", "", 1},
		{"freezes on the third try", 2, "unable to freeze", "", 3},
		{"never freezes", 99, "unable to freeze", "unable to freeze", pauseAttempts},
		{"other error", 99, "container not running", "container not running", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			calls := filepath.Join(dir, "calls")
			script := fmt.Sprintf(`#!/bin/sh
echo "$@" >> %s
[ "$(wc -l < %s)" -gt %d ] && exit 0
echo '{"level":"error","msg":"%s","time":"2026-12-06T00:00:00Z"}' >&2
exit 1
`, calls, calls, tc.fails, tc.msg)
			bin := filepath.Join(dir, "runc")
			if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			r := &Runtime{cfg: Config{Root: dir}, binary: bin}
			err := r.Pause(context.Background(), "sbx_1")
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Pause: %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Pause: %v, want an error saying %q", err, tc.wantErr)
			}
			b, _ := os.ReadFile(calls)
			if got := strings.Count(string(b), "pause sbx_1\n"); got != tc.wantCalls {
				t.Errorf("runtime called %d times (%q), want %d", got, b, tc.wantCalls)
			}
		})
	}
}
