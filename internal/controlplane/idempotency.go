package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/syncs"
)

// IdempotencyConfig tunes Idempotency-Key handling.
type IdempotencyConfig struct {
	// TTL is how long a key answers retries with the first result (24
	// hours, docs/api.md).
	TTL time.Duration
	// Lock is how long an in-progress claim holds before it counts as
	// abandoned (its process died) and a retry may run the request again.
	// It exceeds the longest request (a create that waits up to MaxWait).
	Lock time.Duration
	// Wait bounds how long a concurrent retry waits for the first request
	// to finish before it answers 409 idempotency_key_in_progress.
	Wait time.Duration
	// PurgeInterval is how often expired keys are deleted (from the
	// claim path, so an idle server does no work).
	PurgeInterval time.Duration
}

// DefaultIdempotencyConfig returns the production defaults.
func DefaultIdempotencyConfig() IdempotencyConfig {
	return IdempotencyConfig{TTL: 24 * time.Hour, Lock: 15 * time.Minute, Wait: 30 * time.Second, PurgeInterval: time.Hour}
}

// MaxIdempotencyKeyLen bounds a key's length.
const MaxIdempotencyKeyLen = 255

// Errors of idempotent requests.
var (
	// ErrIdempotencyKeyReused is a key sent again with another request.
	ErrIdempotencyKeyReused = errors.New("idempotency key reused")
	// ErrIdempotencyKeyInProgress is a retry that waited past
	// IdempotencyConfig.Wait for the first request to finish.
	ErrIdempotencyKeyInProgress = errors.New("idempotency key in progress")
)

// idemState is the Service's idempotency bookkeeping.
type idemState struct {
	mu        sync.Mutex
	lastPurge time.Time
}

// idemOwner names this process in the claims it makes: "<host>:<pid>:<boot>",
// boot being random per process. A claim whose owner is this host but not
// this process, and whose pid is gone (or is ours: a restart that got the
// same pid, as PID 1 in a container does), belongs to a ptd that crashed:
// a retry takes it over at once instead of waiting out the lock.
var idemOwner = func() string {
	host, _ := os.Hostname()
	return strings.ReplaceAll(host, "/", "_") + ":" + strconv.Itoa(os.Getpid()) + ":" + randomToken()[:16]
}()

// idemClaimDead reports whether claim was made by a process of this host
// that no longer runs.
func idemClaimDead(claim string) bool {
	owner, _, ok := strings.Cut(claim, "/")
	if !ok || owner == idemOwner {
		return false
	}
	parts := strings.Split(owner, ":")
	mine := strings.Split(idemOwner, ":")
	if len(parts) != 3 || parts[0] != mine[0] {
		return false // another host's: only its lock tells
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return true // this pid, another boot
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// idemTagKey carries a keyed request's tag (see IdempotencyBegin.Tag).
type idemTagKey struct{}

type idemTag struct {
	tag      string
	tookOver bool
	since    time.Time
}

// WithIdempotency marks ctx as running under begin's claim, so operations
// that create records (a sandbox create) tag them, and a retry that took
// over a dead claim finds what the first attempt committed.
func WithIdempotency(ctx context.Context, begin IdempotencyBegin) context.Context {
	if begin.Tag == "" {
		return ctx
	}
	return context.WithValue(ctx, idemTagKey{}, idemTag{tag: begin.Tag, tookOver: begin.TookOver, since: begin.DeadSince})
}

// idempotencyFrom returns ctx's tag; after a takeover, since is when the
// dead claim was made (records it committed are not older).
func idempotencyFrom(ctx context.Context) (tag string, tookOver bool, since time.Time) {
	v, _ := ctx.Value(idemTagKey{}).(idemTag)
	return v.tag, v.tookOver, v.since
}

func idemTagOf(scope, key string) string {
	h := sha256.Sum256([]byte(scope + "\x00" + key))
	return hex.EncodeToString(h[:16])
}

// IdempotentResponse is a stored answer.
type IdempotentResponse struct {
	Status int
	Header map[string][]string
	Body   []byte
}

// IdempotencyBegin is what BeginIdempotent decided: either the caller
// runs the request under Claim (and must Finish or Release it), or it
// answers with Replay.
type IdempotencyBegin struct {
	Claim  string
	Replay *IdempotentResponse
	// Tag names the key (a hash of token scope and key) on records the
	// request creates; TookOver says the claim was taken from a process
	// that died holding it, so the first attempt may have committed.
	Tag      string
	TookOver bool
	// DeadSince is when the taken-over claim was made.
	DeadSince time.Time
}

// ValidateIdempotencyKey checks a key: 1 to 255 printable ASCII characters.
func ValidateIdempotencyKey(key string) error {
	if key == "" || len(key) > MaxIdempotencyKeyLen {
		return &sandbox.FieldError{Field: "idempotency_key", Reason: fmt.Sprintf("must be 1 to %d characters", MaxIdempotencyKeyLen)}
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return &sandbox.FieldError{Field: "idempotency_key", Reason: "must be printable ASCII"}
		}
	}
	return nil
}

// idemScope is whose key it is: the token. A replay must never show one
// token an answer another token got (project tokens see less).
func idemScope(p Principal) string { return p.OrgID + "/" + p.TokenID }

// BeginIdempotent claims key for the request identified by requestHash.
// A key already finished with the same request replays its answer; one
// still running is waited for (up to IdempotencyConfig.Wait, then
// ErrIdempotencyKeyInProgress); one used with another request is
// ErrIdempotencyKeyReused. A claim that is released while waiting is
// claimed again, so the retry runs the request itself.
func (s *Service) BeginIdempotent(ctx context.Context, p Principal, key, requestHash string) (IdempotencyBegin, error) {
	if err := ValidateIdempotencyKey(key); err != nil {
		return IdempotencyBegin{}, err
	}
	s.maybePurgeIdempotency(ctx)
	cfg := s.cfg.Idempotency
	scope := idemScope(p)
	wake := "idem/" + scope + "/" + key
	// A retry of a finished request is the common case: answer it from a
	// read, without a write transaction.
	if held, err := s.store.GetIdempotencyKey(ctx, scope, key); err == nil && held.Done && held.ExpiresAt.After(time.Now()) {
		if held.RequestHash != requestHash {
			return IdempotencyBegin{}, fmt.Errorf("idempotency key %q was first used with another request (method, path or body); use a new key for a new request: %w", key, ErrIdempotencyKeyReused)
		}
		return IdempotencyBegin{Replay: &IdempotentResponse{Status: held.Status, Header: held.Header, Body: held.Body}}, nil
	}
	tookOver, deadSince := false, time.Time{}
	var begin IdempotencyBegin
	var claimOnce func() (done bool, err error)
	claimOnce = func() (bool, error) {
		now := time.Now().UTC()
		claim := idemOwner + "/" + randomToken()
		held, claimed, err := s.store.ClaimIdempotencyKey(ctx, store.IdempotencyRecord{
			Scope: scope, Key: key, RequestHash: requestHash, Claim: claim,
			CreatedAt: now, LockedUntil: now.Add(cfg.Lock), ExpiresAt: now.Add(cfg.TTL),
		}, now)
		if err != nil {
			return false, err
		}
		switch {
		case claimed:
			begin = IdempotencyBegin{Claim: claim, Tag: idemTagOf(scope, key), TookOver: tookOver, DeadSince: deadSince}
			return true, nil
		case held.RequestHash != requestHash:
			return false, fmt.Errorf("idempotency key %q was first used with another request (method, path or body); use a new key for a new request: %w", key, ErrIdempotencyKeyReused)
		case held.Done:
			begin = IdempotencyBegin{Replay: &IdempotentResponse{Status: held.Status, Header: held.Header, Body: held.Body}}
			return true, nil
		case idemClaimDead(held.Claim):
			// Its process crashed: free the claim (a compare-and-swap on
			// it) and claim the key at once.
			s.log.InfoContext(ctx, "idempotency key taken over from a dead process", "key", key, "claim_owner", strings.SplitN(held.Claim, "/", 2)[0])
			if err := s.store.ReleaseIdempotencyKey(ctx, scope, key, held.Claim); err != nil {
				return false, err
			}
			tookOver, deadSince = true, held.CreatedAt
			return claimOnce()
		}
		return false, nil
	}
	done, err := syncs.Wait(ctx, cfg.Wait, min(s.cfg.PollInterval, 100*time.Millisecond),
		func() <-chan struct{} { return s.notify.Channel(wake) }, claimOnce)
	switch {
	case err != nil:
		return IdempotencyBegin{}, err
	case !done:
		return IdempotencyBegin{}, fmt.Errorf("a request with idempotency key %q is still running; retry in a moment: %w", key, ErrIdempotencyKeyInProgress)
	}
	return begin, nil
}

// FinishIdempotent stores the answer of the request that holds claim, so
// retries replay it.
func (s *Service) FinishIdempotent(ctx context.Context, p Principal, key, claim string, r IdempotentResponse) error {
	scope := idemScope(p)
	err := s.store.FinishIdempotencyKey(ctx, store.IdempotencyRecord{Scope: scope, Key: key, Claim: claim, Status: r.Status, Header: r.Header, Body: r.Body})
	s.notify.Broadcast("idem/" + scope + "/" + key)
	return err
}

// ReleaseIdempotent forgets the claim of a request whose answer is not
// kept (a server error, a transient refusal), so a retry runs it again.
func (s *Service) ReleaseIdempotent(ctx context.Context, p Principal, key, claim string) error {
	scope := idemScope(p)
	err := s.store.ReleaseIdempotencyKey(ctx, scope, key, claim)
	s.notify.Broadcast("idem/" + scope + "/" + key)
	return err
}

// maybePurgeIdempotency deletes expired keys at most once per
// PurgeInterval, in the background.
func (s *Service) maybePurgeIdempotency(ctx context.Context) {
	now := time.Now().UTC()
	s.idem.mu.Lock()
	due := now.Sub(s.idem.lastPurge) >= s.cfg.Idempotency.PurgeInterval
	if due {
		s.idem.lastPurge = now
	}
	s.idem.mu.Unlock()
	if !due {
		return
	}
	s.bg.Go(func(ctx context.Context) {
		n, err := s.store.PurgeIdempotencyKeys(ctx, now)
		if err != nil {
			s.log.WarnContext(ctx, "purge idempotency keys", "err", err)
			return
		}
		if n > 0 {
			s.log.DebugContext(ctx, "purged expired idempotency keys", "count", n)
		}
	})
}
