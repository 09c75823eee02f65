package preview

import (
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Fuzz targets for what the preview proxy reads from the outside world:
// the Host header, the path form and the token. Seeds are in
// testdata/fuzz/<target>.

const fuzzDomain = "preview.test"

// FuzzParseHost: a host either routes nowhere or to a valid sandbox id and
// port, and the label that route prints parses back to it.
func FuzzParseHost(f *testing.F) {
	f.Fuzz(func(t *testing.T, host string) {
		tg, ok := parseHost(host, fuzzDomain)
		if !ok {
			return
		}
		if !sandbox.ValidID(sandbox.PrefixSandbox, tg.SandboxID) || tg.Port < 1 || tg.Port > 65535 || tg.Prefix != "" {
			t.Fatalf("%q routed to %+v", host, tg)
		}
		back, ok := parseHost(Label(tg.SandboxID, tg.Port)+"."+fuzzDomain, fuzzDomain)
		if !ok || back != tg {
			t.Fatalf("%q routed to %+v, whose label routes to %+v (%v)", host, tg, back, ok)
		}
	})
}

// FuzzParsePath: a path either routes nowhere or to a valid sandbox id and
// port, with a prefix that is the path's own start and a forwarded path
// that is absolute.
func FuzzParsePath(f *testing.F) {
	f.Fuzz(func(t *testing.T, path string) {
		tg, fwd, ok := parsePath(path)
		if !ok {
			return
		}
		if !sandbox.ValidID(sandbox.PrefixSandbox, tg.SandboxID) || tg.Port < 1 || tg.Port > 65535 {
			t.Fatalf("%q routed to %+v", path, tg)
		}
		if !strings.HasPrefix(path, tg.Prefix) || !strings.HasPrefix(fwd, "/") {
			t.Fatalf("%q: prefix %q, forwarded path %q", path, tg.Prefix, fwd)
		}
	})
}

// FuzzVerifyToken: no string but one the signer made verifies, and a
// token that verifies is exactly the one its claims sign to (no second
// spelling of the same claims is accepted).
func FuzzVerifyToken(f *testing.F) {
	s, err := NewSigner([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	f.Add(s.Sign(Claims{SandboxID: "sbx_01KABCDEFGHJKMNPQRSTVWXYZ0", Port: 8080, Gen: 1}))
	f.Add(s.Sign(Claims{SandboxID: "sbx_01KABCDEFGHJKMNPQRSTVWXYZ0", Port: 3000, Gen: 2, Expires: now.Add(time.Hour)}))
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := s.Verify(tok, now)
		if err != nil {
			if err != ErrBadToken {
				t.Fatalf("%q: %v, want ErrBadToken", tok, err)
			}
			return
		}
		if again := s.Sign(c); again != tok {
			t.Fatalf("%q verified as %+v, which signs to %q", tok, c, again)
		}
	})
}
