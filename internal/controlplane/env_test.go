package controlplane

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestEnvLimitsAtTheBoundary: docs/env-and-secrets.md's limits, byte for byte. One
// KEY=VALUE string with its NUL may be 128 KiB (one more byte is
// env_var_too_large); the whole environment (every string with its NUL)
// may be 256 KiB (one more is env_too_large). Create and patch check the
// same, and a refused create makes no sandbox.
func TestEnvLimitsAtTheBoundary(t *testing.T) {
	val := func(n int) string { return strings.Repeat("v", n) }
	atVarLimit := val(MaxEnvVarBytes - len("K=") - 1)
	var evt *EnvVarTooLargeError
	tests := []struct {
		name    string
		env     map[string]string
		tooBig  bool // env_var_too_large
		tooMuch bool // env_too_large
	}{
		{"one string at 128 KiB", map[string]string{"K": atVarLimit}, false, false},
		{"one string a byte over", map[string]string{"K": atVarLimit + "v"}, true, false},
		{"total at 256 KiB", map[string]string{"A": atVarLimit, "B": atVarLimit}, false, false},
		{"total a byte over", map[string]string{"A": atVarLimit, "B": atVarLimit, "C": ""}, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateEnv(tc.env)
			switch {
			case tc.tooBig && !errors.As(err, &evt):
				t.Errorf("ValidateEnv = %v, want env_var_too_large", err)
			case tc.tooMuch && !errors.Is(err, ErrEnvTooLarge):
				t.Errorf("ValidateEnv = %v, want env_too_large", err)
			case !tc.tooBig && !tc.tooMuch && err != nil:
				t.Errorf("ValidateEnv = %v, want nil", err)
			}
		})
	}

	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	if _, err := s.Create(ctx, org, CreateRequest{Template: "busybox", Env: tests[3].env}); !errors.Is(err, ErrEnvTooLarge) {
		t.Errorf("create over the total: %v", err)
	}
	if _, err := s.Create(ctx, org, CreateRequest{Template: "busybox", Env: tests[1].env}); !errors.As(err, &evt) {
		t.Errorf("create with one string over: %v", err)
	}
	if rows, total, _ := s.List(ctx, org, ListRequest{Include: []string{"failed", "destroyed"}}); total != 0 {
		t.Errorf("refused creates made %d sandboxes: %v", total, rows)
	}
	// Patches: the merged whole is what counts.
	sb := running(t, s, CreateRequest{Template: "busybox", Env: map[string]string{"A": atVarLimit}})
	b := atVarLimit
	if _, err := s.PatchEnv(ctx, org, sb.ID, map[string]*string{"B": &b}); err != nil {
		t.Fatalf("patch up to the total: %v", err)
	}
	empty := ""
	if _, err := s.PatchEnv(ctx, org, sb.ID, map[string]*string{"C": &empty}); !errors.Is(err, ErrEnvTooLarge) {
		t.Errorf("patch a byte past the total: %v", err)
	}
	// Removing one makes room in the same patch.
	if _, err := s.PatchEnv(ctx, org, sb.ID, map[string]*string{"A": nil, "C": &empty}); err != nil {
		t.Errorf("patch that removes and adds: %v", err)
	}
	got, _ := s.Get(ctx, org, sb.ID, false)
	if _, ok := got.Env["A"]; ok || got.Env["B"] != b || len(got.Env) != 2 {
		t.Errorf("env keys after the patches: %d", len(got.Env))
	}
}
