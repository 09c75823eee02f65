package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTrust: the certificate lands in each file (parents made) and once at
// the end of the bundle, however often trust runs; a bundle that is not
// there yet is made.
func TestTrust(t *testing.T) {
	const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
	tests := []struct {
		name, bundle, want string
		absent             bool
	}{
		{name: "appended", bundle: "ROOT-A\n", want: "ROOT-A\n" + pem + "\n"},
		{name: "no trailing newline", bundle: "ROOT-A", want: "ROOT-A\n" + pem + "\n"},
		{name: "no bundle", absent: true, want: pem + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bundle := filepath.Join(dir, "etc/ssl/certs/ca-certificates.crt")
			files := []string{filepath.Join(dir, "etc/ssl/certs/ca.pem"), filepath.Join(dir, "usr/local/share/ca-certificates/ca.crt")}
			if !tc.absent {
				os.MkdirAll(filepath.Dir(bundle), 0o755)
				if err := os.WriteFile(bundle, []byte(tc.bundle), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				if err := trust(append([]string{pem, bundle}, files...)); err != nil {
					t.Fatal(err)
				}
			}
			if got, _ := os.ReadFile(bundle); string(got) != tc.want {
				t.Errorf("bundle = %q, want %q", got, tc.want)
			}
			for _, f := range files {
				if got, _ := os.ReadFile(f); string(got) != pem+"\n" {
					t.Errorf("%s = %q", f, got)
				}
			}
		})
	}
	if err := trust(nil); err == nil {
		t.Error("trust without arguments: no error")
	}
}
