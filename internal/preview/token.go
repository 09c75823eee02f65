// Package preview is ptd's preview proxy (docs/preview-and-network.md,
// "Preview URLs"): it serves a sandbox's ports on their own listener at
// <port>-<sandbox id>.<domain> (or /<sandbox id>/<port>/… for clients that
// cannot set Host), checks the preview token every request carries (unless
// the port is public) before anything else happens, starts stopped or
// archived sandboxes that the token reaches, and streams HTTP/1.1, h2c,
// WebSocket and long-lived responses through without buffering. It also
// signs the tokens the REST API hands out, with a key kept in the data
// dir, so no token table is needed: revocation moves a port's generation.
package preview

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrBadToken is a token that is malformed, signed with another key,
// or names another sandbox, port or generation, or has expired.
var ErrBadToken = errors.New("bad preview token")

// Claims is what a preview token grants: requests to one port of one
// sandbox, while the port's generation is Gen, until Expires (zero: no
// expiry).
type Claims struct {
	SandboxID string
	Port      int
	Gen       int64
	Expires   time.Time
}

// Signer signs and verifies preview tokens with HMAC-SHA256. Tokens are
// "pv1.<payload>.<mac>" in unpadded base64url, the payload being
// "<sandbox id>|<port>|<generation>|<expiry unix seconds or 0>": readable,
// since nothing in it is secret, and short enough for a URL.
type Signer struct {
	key []byte
}

const tokenPrefix = "pv1."

// NewSigner returns a Signer for a key of at least 32 bytes.
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("preview key: want at least 32 bytes, have %d", len(key))
	}
	return &Signer{key: append([]byte(nil), key...)}, nil
}

func (s *Signer) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("platinum preview token\x00"))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// Sign returns a token carrying c.
func (s *Signer) Sign(c Claims) string {
	var exp int64
	if !c.Expires.IsZero() {
		exp = c.Expires.Unix()
	}
	payload := fmt.Sprintf("%s|%d|%d|%d", c.SandboxID, c.Port, c.Gen, exp)
	enc := base64.RawURLEncoding
	return tokenPrefix + enc.EncodeToString([]byte(payload)) + "." + enc.EncodeToString(s.mac(payload))
}

// Verify checks tok's signature and expiry at now and returns its claims;
// any failure is ErrBadToken. Callers still compare the claims with the
// request (sandbox, port) and the port's current generation.
func (s *Signer) Verify(tok string, now time.Time) (Claims, error) {
	rest, ok := strings.CutPrefix(tok, tokenPrefix)
	if !ok {
		return Claims{}, ErrBadToken
	}
	p64, m64, ok := strings.Cut(rest, ".")
	if !ok {
		return Claims{}, ErrBadToken
	}
	// One spelling per token: the decoder skips CR and LF, and only Strict
	// refuses non-zero padding bits, either of which would let several
	// strings verify as the same claims.
	if strings.ContainsAny(tok, "\r\n") {
		return Claims{}, ErrBadToken
	}
	enc := base64.RawURLEncoding.Strict()
	payload, err := enc.DecodeString(p64)
	if err != nil {
		return Claims{}, ErrBadToken
	}
	mac, err := enc.DecodeString(m64)
	if err != nil || !hmac.Equal(mac, s.mac(string(payload))) {
		return Claims{}, ErrBadToken
	}
	f := strings.Split(string(payload), "|")
	if len(f) != 4 {
		return Claims{}, ErrBadToken
	}
	port, err1 := strconv.Atoi(f[1])
	gen, err2 := strconv.ParseInt(f[2], 10, 64)
	exp, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Claims{}, ErrBadToken
	}
	c := Claims{SandboxID: f[0], Port: port, Gen: gen}
	if exp != 0 {
		c.Expires = time.Unix(exp, 0).UTC()
		if !now.Before(c.Expires) {
			return Claims{}, ErrBadToken
		}
	}
	return c, nil
}
