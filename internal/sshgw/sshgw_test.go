package sshgw

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestHostKeyPersists: the host key is made once (0600) and read back
// the same, so clients' known_hosts survive a restart.
func TestHostKeyPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "ssh_host_ed25519_key")
	a, err := LoadOrCreateHostKey(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want mode 0600", fi, err)
	}
	b, err := LoadOrCreateHostKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if a.PublicKey().Type() != "ssh-ed25519" || !bytes.Equal(a.PublicKey().Marshal(), b.PublicKey().Marshal()) {
		t.Fatalf("host key changed across loads: %s vs %s", a.PublicKey().Type(), b.PublicKey().Type())
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateHostKey(path); err == nil {
		t.Fatal("a corrupt host key was accepted (it must not be silently replaced)")
	}
}

// TestResumeMessage: what a session says when its login could not bring
// the sandbox to running.
func TestResumeMessage(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("sandbox %q: %w", "sbx_x", controlplane.ErrAutoResumeDisabled), "the sandbox is stopped and its auto_resume is off: start it first"},
		{&controlplane.StateError{State: sandbox.StateFailed}, "the sandbox is failed and cannot be started by a login"},
		{context.DeadlineExceeded, "the sandbox did not start within 2m0s"},
		{errors.New("boom"), "the sandbox could not be started: boom"},
	} {
		if got := resumeMessage(tc.err); !strings.HasPrefix(got, tc.want) || (tc.want == "" && got != "") {
			t.Errorf("resumeMessage(%v) = %q, want %q…", tc.err, got, tc.want)
		}
	}
}
