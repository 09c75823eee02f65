package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// A sandbox's SSH keys (docs/terminal.md) are the only credentials the
// SSH gateway accepts for it. They are stored in authorized_keys form
// without comments and shown only as fingerprints.

// MaxSSHKeys bounds the keys of one sandbox.
const MaxSSHKeys = 32

// maxSSHKeyLen bounds one key line (an RSA-16384 key is under 3 KiB).
const maxSSHKeyLen = 8 << 10

// ParseSSHKeys validates authorized_keys lines and returns them
// normalized ("type base64", comment dropped), duplicates removed. A bad key is a
// FieldError naming ssh_keys[i].
func ParseSSHKeys(keys []string) ([]string, error) {
	if len(keys) > MaxSSHKeys {
		return nil, &sandbox.FieldError{Field: "ssh_keys", Reason: fmt.Sprintf("at most %d keys", MaxSSHKeys)}
	}
	out := make([]string, 0, len(keys))
	seen := map[string]bool{}
	for i, k := range keys {
		field := fmt.Sprintf("ssh_keys[%d]", i)
		if len(k) > maxSSHKeyLen {
			return nil, &sandbox.FieldError{Field: field, Reason: fmt.Sprintf("must be at most %d bytes", maxSSHKeyLen)}
		}
		pub, _, opts, rest, err := ssh.ParseAuthorizedKey([]byte(k))
		if err != nil {
			return nil, &sandbox.FieldError{Field: field, Reason: "is not an SSH public key in authorized_keys form (e.g. \"ssh-ed25519 AAAA... me@host\"): " + err.Error()}
		}
		if len(opts) > 0 {
			// The gateway would not honour from=, command= and the like.
			return nil, &sandbox.FieldError{Field: field, Reason: "must not carry authorized_keys options (" + strings.Join(opts, ",") + ")"}
		}
		if len(strings.TrimSpace(string(rest))) > 0 {
			return nil, &sandbox.FieldError{Field: field, Reason: "must be one key: a single authorized_keys line"}
		}
		norm := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
		if !seen[norm] {
			seen[norm] = true
			out = append(out, norm)
		}
	}
	return out, nil
}

// SSHKeyFingerprints returns the SHA256 fingerprints ("SHA256:...") of
// stored keys, in order.
func SSHKeyFingerprints(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k)); err == nil {
			out = append(out, ssh.FingerprintSHA256(pub))
		}
	}
	return out
}

// SSHLogin authorizes a gateway login as sandbox id with key: the key
// must be one of that sandbox's. Every refusal (unknown or deleted
// sandbox, no such key) is the same sandbox.ErrUnauthenticated, so a
// client learns nothing about other sandboxes. The principal acts in the
// sandbox's org and project.
func (s *Service) SSHLogin(ctx context.Context, id string, key ssh.PublicKey) (Principal, error) {
	denied := fmt.Errorf("ssh login as %q: %w", id, sandbox.ErrUnauthenticated)
	if !sandbox.ValidID(sandbox.PrefixSandbox, id) {
		return Principal{}, denied
	}
	sb, err := s.store.GetSandbox(ctx, "", id)
	if err != nil || sb.State == sandbox.StateDeleted || sb.State == sandbox.StateDeleting {
		return Principal{}, denied
	}
	want := key.Marshal()
	for _, k := range sb.SSHKeys {
		pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k))
		if err == nil && bytes.Equal(pub.Marshal(), want) {
			return Principal{OrgID: sb.OrgID, Role: store.RoleMember, ProjectID: sb.ProjectID}, nil
		}
	}
	return Principal{}, denied
}

// SandboxPortAddr is where a forwarded connection to a running sandbox's
// port goes (its address on the bridge); the agent's port is refused.
func (s *Service) SandboxPortAddr(ctx context.Context, p Principal, id string, port int) (string, error) {
	if port < 1 || port > 65535 || port == AgentPort {
		return "", &sandbox.FieldError{Field: "port", Reason: fmt.Sprintf("must be 1-65535 and not %d (the agent's)", AgentPort)}
	}
	sb, err := s.Get(ctx, p, id, false)
	if err != nil {
		return "", err
	}
	if sb.State != sandbox.StateRunning {
		return "", &StateError{State: sb.State}
	}
	s.Touch(id)
	return net.JoinHostPort(sb.Address, strconv.Itoa(port)), nil
}
