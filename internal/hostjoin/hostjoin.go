// Package hostjoin is how a host's ptd joins a platform without the
// store's URL (`ptd serve --role=host --join URL --host-token T`,
// docs/ARCHITECTURE.md "Joined hosts"): the platform's ptd that holds the
// store answers GET Path with what every ptd of the platform must share —
// its region, the keys that seal secrets and sign preview tokens, the SSH
// host key its gateways show, and the object store — to callers presenting the host token, and the host reads
// it once at start-up. The store itself then travels over
// internal/store/remote on the same listener and token.
//
// The token is the platform's one host credential: whoever holds it can
// read every org's records and the keys, as a host given the store's URL
// could. It is compared in constant time, and only the API listener serves
// it (never the sandboxes' own listener).
package hostjoin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// Path is where the platform's ptd answers a joining host.
const Path = "/_pt/join"

// MinTokenLen is the shortest host token accepted: it guards every org's
// data, so it must not be guessable (`openssl rand -hex 32` makes one).
const MinTokenLen = 32

// Info is what a joining host takes from the platform.
type Info struct {
	// Region is the platform's region ("" without --region).
	Region string `json:"region"`
	// SecretsKey seals sandbox, webhook and registry secrets in the shared
	// store, so every ptd must open what another sealed.
	SecretsKey []byte `json:"secrets_key"`
	// PreviewKey signs preview tokens; shared, a token stays valid on
	// whichever ptd's preview proxy or host the sandbox is served by.
	// Empty when the platform's ptd runs no preview proxy.
	PreviewKey []byte `json:"preview_key,omitempty"`
	// SSHHostKey is the host key (OpenSSH private key) every SSH gateway
	// of the platform shows clients, so one known_hosts entry serves
	// behind a load balancer. Empty when the platform's ptd runs no
	// gateway: each host then shows its own.
	SSHHostKey []byte `json:"ssh_host_key,omitempty"`
	// Objects is the platform's object store (archives, backups, stop
	// snapshots), which hosts must share.
	Objects Objects `json:"objects"`
}

// Objects names the object store: S3 (Endpoint set) or a local directory
// (Dir), which only hosts on the same machine share.
type Objects struct {
	Endpoint  string `json:"endpoint,omitempty"`
	Region    string `json:"region,omitempty"`
	AccessKey string `json:"access_key,omitempty"`
	SecretKey string `json:"secret_key,omitempty"`
	Dir       string `json:"dir,omitempty"`
	// Bucket is the archive bucket.
	Bucket string `json:"bucket"`
}

// CheckToken refuses a host token too short to guard the platform.
func CheckToken(tok string) error {
	if len(tok) < MinTokenLen {
		return fmt.Errorf("--host-token (or PT_HOST_TOKEN) must be at least %d characters (openssl rand -hex 32 makes one)", MinTokenLen)
	}
	return nil
}

// Authorizer reports whether a request presents token as its bearer.
func Authorizer(token string) func(*http.Request) bool {
	want := []byte("Bearer " + token)
	return func(r *http.Request) bool {
		return subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) == 1
	}
}

// Handler answers GET Path with info to requests authorize accepts, 401
// to the rest.
func Handler(info Info, authorize func(*http.Request) bool) http.Handler {
	body, err := json.Marshal(info)
	if err != nil {
		panic(err) // plain fields only
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		switch {
		case !authorize(r):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"code":"unauthenticated","message":"a joining host must present the platform's host token (--host-token)"}`)
		case r.Method != http.MethodGet:
			w.Header().Set("Allow", http.MethodGet)
			w.WriteHeader(http.StatusMethodNotAllowed)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		}
	})
}

// ErrRefused is a join the platform answered but would not grant: a wrong
// token, or a URL that is no platform ptd serving hosts. Retrying does not
// help.
var ErrRefused = errors.New("join refused")

// Fetch asks the platform's ptd at baseURL for its Info. It retries while
// the ptd cannot be reached (a host may start before it), logging each
// failure, until ctx ends; a refusal ends it at once with ErrRefused.
func Fetch(ctx context.Context, baseURL, token string, log *slog.Logger) (Info, error) {
	wait := 250 * time.Millisecond
	for {
		info, err := fetchOnce(ctx, baseURL, token)
		if err == nil || errors.Is(err, ErrRefused) {
			return info, err
		}
		log.Warn("joining the platform: its ptd does not answer yet; retrying", "join", baseURL, "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return Info{}, fmt.Errorf("join %s: %w (last: %w)", baseURL, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func fetchOnce(ctx context.Context, baseURL, token string) (Info, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+Path, nil)
	if err != nil {
		return Info{}, fmt.Errorf("--join %q: %w: %w", baseURL, ErrRefused, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Info{}, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return Info{}, fmt.Errorf("join %s: %w: the platform refused the host token: give this host the --host-token (or PT_HOST_TOKEN) of the ptd it joins", baseURL, ErrRefused)
	case resp.StatusCode == http.StatusNotFound:
		return Info{}, fmt.Errorf("join %s: %w: that ptd serves no hosts: start it with --host-token", baseURL, ErrRefused)
	case resp.StatusCode >= 500:
		return Info{}, fmt.Errorf("join %s: %s", baseURL, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return Info{}, fmt.Errorf("join %s: %w: %s", baseURL, ErrRefused, resp.Status)
	}
	var info Info
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); err != nil {
		return Info{}, fmt.Errorf("join %s: %w: its answer: %w", baseURL, ErrRefused, err)
	}
	if len(info.SecretsKey) == 0 {
		return Info{}, fmt.Errorf("join %s: %w: its answer has no secrets key", baseURL, ErrRefused)
	}
	return info, nil
}
