package controlplane

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

func TestParseSSHKeys(t *testing.T) {
	p, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, _ := ssh.NewPublicKey(p)
	norm := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp)))
	many := make([]string, MaxSSHKeys+1)
	for i := range many {
		many[i] = norm
	}
	for _, tc := range []struct {
		name  string
		in    []string
		want  []string
		field string
	}{
		{"none", nil, []string{}, ""},
		{"comment dropped", []string{norm + " me@laptop"}, []string{norm}, ""},
		{"whitespace and duplicates", []string{"  " + norm + "\n", norm + " other"}, []string{norm}, ""},
		{"bad second", []string{norm, "ssh-ed25519 nope"}, nil, "ssh_keys[1]"},
		{"options", []string{`command="id" ` + norm}, nil, "ssh_keys[0]"},
		{"two keys in one", []string{norm + "\n" + norm}, nil, "ssh_keys[0]"},
		{"too long", []string{norm + " " + strings.Repeat("x", maxSSHKeyLen)}, nil, "ssh_keys[0]"},
		{"too many", many, nil, "ssh_keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSSHKeys(tc.in)
			if tc.field != "" {
				var fe *sandbox.FieldError
				if !errors.As(err, &fe) || fe.Field != tc.field {
					t.Fatalf("err %v, want a FieldError on %s", err, tc.field)
				}
				return
			}
			if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if fps := SSHKeyFingerprints([]string{norm}); len(fps) != 1 || fps[0] != ssh.FingerprintSHA256(sp) {
		t.Errorf("fingerprints %v", fps)
	}
}
