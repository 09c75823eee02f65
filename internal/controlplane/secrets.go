package controlplane

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// SecretInput is a secret as given at create: a value, and optionally the
// hosts it may be sent to.
type SecretInput struct {
	Value string
	Hosts []string
	// Body lets the egress proxy replace the placeholder in request
	// bodies too.
	Body bool
}

// Sealer seals secret values at rest (internal/secrets implements it).
type Sealer interface {
	Seal(plaintext, aad string) string
	Open(sealed, aad string) (string, error)
}

// Limits on secrets.
const (
	MaxSecrets          = 64
	MaxSecretValueBytes = 64 * 1024
)

// sealSecrets validates and seals the create-time secrets of sandbox id.
func (s *Service) sealSecrets(id string, in map[string]SecretInput) (map[string]sandbox.Secret, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if s.cfg.Sealer == nil {
		return nil, fmt.Errorf("secrets are not configured on this server: %w", sandbox.ErrUnavailable)
	}
	if len(in) > MaxSecrets {
		return nil, &sandbox.FieldError{Field: "secrets", Reason: fmt.Sprintf("at most %d secrets", MaxSecrets)}
	}
	out := make(map[string]sandbox.Secret, len(in))
	for name, v := range in {
		if !envKeyRE.MatchString(name) {
			return nil, &sandbox.FieldError{Field: "secrets", Reason: fmt.Sprintf("name %q must match [A-Za-z_][A-Za-z0-9_]*", name)}
		}
		if v.Value == "" || len(v.Value) > MaxSecretValueBytes {
			return nil, &sandbox.FieldError{Field: "secrets", Reason: fmt.Sprintf("value of %s must be 1 to %d bytes", name, MaxSecretValueBytes)}
		}
		var hosts []string
		for _, h := range v.Hosts {
			h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
			if len(h) > 253 || !domainRE.MatchString(h) {
				return nil, &sandbox.FieldError{Field: "secrets", Reason: fmt.Sprintf("hosts of %s must be host names (exact or *.suffix), not %q", name, h)}
			}
			hosts = append(hosts, h)
		}
		b := make([]byte, 16)
		rand.Read(b)
		out[name] = sandbox.Secret{
			Sealed: s.cfg.Sealer.Seal(v.Value, id+"/"+name), Placeholder: "pt_secret_" + hex.EncodeToString(b), Hosts: hosts, Body: v.Body,
		}
	}
	return out, nil
}

// sandboxEnv is the environment the sandbox's processes see: its env plus
// each secret's placeholder (never the value). An env key wins over a
// secret of the same name.
func (s *Service) sandboxEnv(sb sandbox.Sandbox) map[string]string {
	if len(sb.Secrets) == 0 && sb.APIToken == "" {
		return sb.Env
	}
	env := make(map[string]string, len(sb.Env)+len(sb.Secrets)+2)
	if sb.APIToken != "" && s.cfg.Sealer != nil {
		if tok, err := s.cfg.Sealer.Open(sb.APIToken, sb.ID+"/PT_TOKEN"); err == nil {
			env["PT_API_URL"], env["PT_TOKEN"] = s.cfg.SandboxAPIURL, tok
		}
	}
	for name, sec := range sb.Secrets {
		env[name] = sec.Placeholder
	}
	if len(sb.Secrets) > 0 {
		// The host installs the sandbox's egress CA in this bundle.
		maps.Copy(env, egressCAEnv)
	}
	maps.Copy(env, sb.Env)
	return env
}
