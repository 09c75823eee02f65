package events

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/crashpoint"
	"github.com/platinum-dev/platinum/internal/metrics"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/syncs"
	"github.com/platinum-dev/platinum/internal/tenancy"
	"github.com/platinum-dev/platinum/internal/webhook"
)

// Config tunes the feed and webhook deliveries.
type Config struct {
	// PollInterval is the backstop poll of waits and of the dispatcher,
	// covering writers this process does not see.
	PollInterval time.Duration
	// Sealer seals webhook secrets at rest; nil keeps them as given.
	Sealer Sealer
	// AllowPrivate lets webhook URLs reach loopback, private (RFC 1918,
	// fc00::/7) and shared (100.64/10, where sandboxes live) addresses.
	// Off in production: a webhook must not make ptd a proxy into the
	// host's networks. Link-local addresses (cloud metadata) are refused
	// even then.
	AllowPrivate bool
	// MaxAttempts bounds the sends of one delivery; after the last failure
	// it is marked failed.
	MaxAttempts int
	// RetryBase is the wait after the first failure; it doubles after each
	// further failure, up to RetryMax.
	RetryBase, RetryMax time.Duration
	// Timeout bounds one send (connect to last response byte).
	Timeout time.Duration
	// Workers is how many deliveries are sent at once.
	Workers int
	// MaxPerOrg bounds an org's webhooks.
	MaxPerOrg int
	// DeliveryRetention is how long finished deliveries stay listed.
	DeliveryRetention time.Duration
	// EventRetention is how long events are kept (0: forever). Pruning
	// spares events a pending delivery needs and the usage history of
	// sandboxes whose record exists; a feed cursor older than what was
	// pruned is refused with EventsPrunedError.
	EventRetention time.Duration
	// LeaseTTL is how long the dispatcher's lease (LeaseWebhooks) lasts
	// unrenewed: ptd processes sharing a store dispatch one at a time, and
	// a killed dispatcher's duty moves to another within it.
	LeaseTTL time.Duration
	// Holder names this process as the lease's holder; empty takes a
	// random name.
	Holder string
}

// LeaseWebhooks is the lease of the webhook dispatcher (fan-out, sends,
// pruning): one ptd process sharing a store runs it at a time.
const LeaseWebhooks = "loop/webhooks"

// Sealer seals secrets at rest, bound to what they belong to (aad).
type Sealer interface {
	Seal(plaintext, aad string) string
	Open(sealed, aad string) (string, error)
}

// DefaultConfig returns the production defaults: a 1 s backstop poll, 12
// attempts over about two hours (2 s, 4 s, … capped at one hour), 30 days
// of events.
func DefaultConfig() Config {
	return Config{PollInterval: time.Second, MaxAttempts: 12, RetryBase: 2 * time.Second, RetryMax: time.Hour,
		Timeout: 10 * time.Second, Workers: 4, MaxPerOrg: 20, DeliveryRetention: 7 * 24 * time.Hour,
		EventRetention: 30 * 24 * time.Hour, LeaseTTL: 10 * time.Second}
}

// Service is the events part of the control plane: the feed, its
// retention and webhooks. Create it with New, start the dispatcher with
// Run and stop it with Close.
type Service struct {
	cfg   Config
	store store.Store
	feed  *Feed
	log   *slog.Logger

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns the service over st (wrapped by feed, so this process's
// commits wake readers).
func New(cfg Config, st store.Store, feed *Feed, logger *slog.Logger) *Service {
	ctx, cancel := context.WithCancel(context.Background())
	if cfg.Holder == "" {
		b := make([]byte, 8)
		rand.Read(b)
		cfg.Holder = "events/" + hex.EncodeToString(b)
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 10 * time.Second
	}
	return &Service{cfg: cfg, store: st, feed: feed, log: logger, ctx: ctx, cancel: cancel}
}

// Close stops the dispatcher and waits for it; deliveries in flight stay
// pending and are sent after the next start.
func (s *Service) Close() {
	s.cancel()
	s.wg.Wait()
}

// backoff is the wait after the attempts-th failed send.
func (c Config) backoff(attempts int) time.Duration {
	d := c.RetryBase
	for i := 1; i < attempts && d < c.RetryMax; i++ {
		d *= 2
	}
	return min(d, c.RetryMax)
}

// Webhook is an org's webhook as callers see it. Secret is set only in
// CreateWebhook's answer: it is never shown again.
type Webhook struct {
	ID        string
	URL       string
	Events    []string
	Secret    string
	CreatedAt time.Time
}

// WebhookRequest creates a webhook. Events empty means every event type;
// Secret empty means the server generates one.
type WebhookRequest struct {
	URL    string
	Events []string
	Secret string
}

// Webhook limits.
const (
	maxWebhookURL    = 2048
	maxWebhookEvents = 32
	minWebhookSecret = 16
	maxWebhookSecret = 256
)

func (s *Service) validateWebhook(r WebhookRequest) error {
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || len(r.URL) > maxWebhookURL {
		return &sandbox.FieldError{Field: "url", Reason: fmt.Sprintf("must be an absolute http:// or https:// URL of at most %d characters", maxWebhookURL)}
	}
	if u.User != nil {
		return &sandbox.FieldError{Field: "url", Reason: "must not carry credentials; verify deliveries with the signature instead"}
	}
	host := u.Hostname()
	if host == "localhost" || len(host) > len(".localhost") && host[len(host)-len(".localhost"):] == ".localhost" {
		host = "127.0.0.1"
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if err := webhook.CheckAddr(a, s.cfg.AllowPrivate); err != nil {
			return &sandbox.FieldError{Field: "url", Reason: err.Error()}
		}
	}
	if len(r.Events) > maxWebhookEvents {
		return &sandbox.FieldError{Field: "events", Reason: fmt.Sprintf("at most %d event types", maxWebhookEvents)}
	}
	for _, e := range r.Events {
		if e == "" || len(e) > 64 {
			return &sandbox.FieldError{Field: "events", Reason: "event types must be 1 to 64 characters"}
		}
	}
	if r.Secret != "" && (len(r.Secret) < minWebhookSecret || len(r.Secret) > maxWebhookSecret) {
		return &sandbox.FieldError{Field: "secret", Reason: fmt.Sprintf("must be %d to %d characters (or omitted: the server generates one)", minWebhookSecret, maxWebhookSecret)}
	}
	return nil
}

// CreateWebhook registers a webhook for the caller's org. It receives the
// events committed from now on; the answer carries the signing secret,
// shown only this once.
func (s *Service) CreateWebhook(ctx context.Context, p tenancy.Principal, r WebhookRequest) (Webhook, error) {
	if err := tenancy.RequireOrgToken(p, "webhooks"); err != nil {
		return Webhook{}, err
	}
	if err := s.validateWebhook(r); err != nil {
		return Webhook{}, err
	}
	existing, err := s.store.ListWebhooks(ctx, p.OrgID)
	if err != nil {
		return Webhook{}, err
	}
	if max := s.cfg.MaxPerOrg; max > 0 && len(existing) >= max {
		return Webhook{}, fmt.Errorf("the org has %d webhooks, the most it may have; delete one first: %w", len(existing), sandbox.ErrConflict)
	}
	secret := r.Secret
	if secret == "" {
		b := make([]byte, 24)
		rand.Read(b)
		secret = "whsec_" + hex.EncodeToString(b)
	}
	id := sandbox.NewID("whk_")
	stored := secret
	if s.cfg.Sealer != nil {
		stored = s.cfg.Sealer.Seal(secret, id+"/secret")
	}
	events := slices.Clone(r.Events)
	slices.Sort(events)
	w, err := s.store.CreateWebhook(ctx, store.Webhook{ID: id, OrgID: p.OrgID, URL: r.URL, Events: slices.Compact(events),
		Secret: stored})
	if err != nil {
		return Webhook{}, err
	}
	out := webhookFrom(w)
	out.Secret = secret
	s.log.InfoContext(ctx, "webhook created", "webhook", id, "org", p.OrgID)
	return out, nil
}

func webhookFrom(w store.Webhook) Webhook {
	return Webhook{ID: w.ID, URL: w.URL, Events: w.Events, CreatedAt: w.CreatedAt}
}

// ListWebhooks lists the caller's org's webhooks, oldest first.
func (s *Service) ListWebhooks(ctx context.Context, p tenancy.Principal) ([]Webhook, error) {
	if err := tenancy.RequireOrgToken(p, "webhooks"); err != nil {
		return nil, err
	}
	ws, err := s.store.ListWebhooks(ctx, p.OrgID)
	if err != nil {
		return nil, err
	}
	out := make([]Webhook, 0, len(ws))
	for _, w := range ws {
		out = append(out, webhookFrom(w))
	}
	return out, nil
}

// GetWebhook returns one webhook of the caller's org.
func (s *Service) GetWebhook(ctx context.Context, p tenancy.Principal, id string) (Webhook, error) {
	if err := tenancy.RequireOrgToken(p, "webhooks"); err != nil {
		return Webhook{}, err
	}
	w, err := s.store.GetWebhook(ctx, p.OrgID, id)
	if err != nil {
		return Webhook{}, err
	}
	return webhookFrom(w), nil
}

// DeleteWebhook removes a webhook and its pending deliveries.
func (s *Service) DeleteWebhook(ctx context.Context, p tenancy.Principal, id string) error {
	if err := tenancy.RequireOrgToken(p, "webhooks"); err != nil {
		return err
	}
	return s.store.DeleteWebhook(ctx, p.OrgID, id)
}

// WebhookDeliveries lists a webhook's deliveries, newest first.
func (s *Service) WebhookDeliveries(ctx context.Context, p tenancy.Principal, id string, limit int) ([]store.Delivery, error) {
	if err := tenancy.RequireOrgToken(p, "webhooks"); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	return s.store.ListDeliveries(ctx, p.OrgID, id, limit)
}

// Run starts the webhook dispatcher and returns: it fans new events out
// into deliveries stored per webhook and sends due deliveries on a few
// workers, retrying failures with exponential backoff, until ctx ends or
// Close. It never runs on a request's path; deliveries left pending by a
// crash are sent after the restart.
func (s *Service) Run(ctx context.Context) {
	d := &dispatcher{s: s, inflight: map[int64]bool{}, client: webhook.NewClient(s.cfg.AllowPrivate, s.cfg.Timeout)}
	d.sem = make(chan struct{}, max(1, s.cfg.Workers))
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel) // Close ends it too
	s.wg.Go(func() {
		defer stop()
		defer cancel()
		// Renewing well inside the TTL: at least three passes per TTL.
		every := min(s.cfg.PollInterval, time.Second, s.cfg.LeaseTTL/3)
		syncs.Loop(ctx, every, s.feed.Wake, func(ctx context.Context) {
			if !d.lead(ctx) {
				return
			}
			d.fanOut(ctx)
			d.sendDue(ctx)
			d.prune(ctx)
		})
		d.wg.Wait()
		// Hand the duty over at once rather than at the lease's expiry.
		s.store.ReleaseLease(context.WithoutCancel(ctx), LeaseWebhooks, s.cfg.Holder)
	})
}

// lead takes or renews the dispatcher's lease and reports whether this
// process holds it. Sends a former holder still has in flight when its
// lease lapses may overlap the new holder's: delivery is at least once.
func (d *dispatcher) lead(ctx context.Context) bool {
	_, held, err := d.s.store.AcquireLease(ctx, LeaseWebhooks, d.s.cfg.Holder, d.s.cfg.LeaseTTL)
	if err != nil {
		if ctx.Err() == nil {
			d.s.log.WarnContext(ctx, "webhooks: lease", "err", err)
		}
		return false
	}
	return held
}

// dispatcher is the state of Run's loop.
type dispatcher struct {
	s      *Service
	client *webhook.Client
	sem    chan struct{}
	wg     sync.WaitGroup

	mu sync.Mutex
	// inflight maps a delivery to true while a send runs, false once it
	// finished until the next sendDue clears it.
	inflight map[int64]bool

	lastPrune time.Time // only the loop touches it
}

// prune drops finished deliveries and events past their retention, once
// an hour.
func (d *dispatcher) prune(ctx context.Context) {
	if time.Since(d.lastPrune) < time.Hour {
		return
	}
	d.lastPrune = time.Now()
	d.s.pruneEvents(ctx)
	ret := d.s.cfg.DeliveryRetention
	if ret <= 0 {
		return
	}
	if n, err := d.s.store.PruneDeliveries(ctx, time.Now().Add(-ret)); err != nil {
		d.s.log.WarnContext(ctx, "webhooks: prune deliveries", "err", err)
	} else if n > 0 {
		d.s.log.InfoContext(ctx, "webhooks: pruned finished deliveries", "count", n)
	}
}

// fanOut queues a delivery of every new event to each webhook that wants
// it, advancing each webhook's cursor in the same transaction.
func (d *dispatcher) fanOut(ctx context.Context) {
	hooks, err := d.s.store.ListWebhooks(ctx, "")
	if err != nil {
		d.s.log.WarnContext(ctx, "webhooks: list", "err", err)
		return
	}
	for _, w := range hooks {
		for {
			rows, err := d.s.store.ListEvents(ctx, store.EventQuery{OrgID: w.OrgID, AfterID: w.Cursor, Limit: eventScan})
			if err != nil || len(rows) == 0 {
				break
			}
			var ids []int64
			for _, e := range rows {
				if len(w.Events) == 0 || slices.Contains(w.Events, e.Type) {
					ids = append(ids, e.ID)
				}
			}
			to := rows[len(rows)-1].ID
			if err := d.s.store.AdvanceWebhook(ctx, w.ID, w.Cursor, to, ids); err != nil {
				if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
					d.s.log.WarnContext(ctx, "webhooks: fan out", "webhook", w.ID, "err", err)
				}
				break
			}
			if len(ids) > 0 {
				crashpoint.Hit("webhook.queued")
			}
			w.Cursor = to
			if len(rows) < eventScan {
				break
			}
		}
	}
}

// sendDue starts a send of every due delivery not already in flight. A
// finished send stays listed until the next call has cleared it before
// its read, so a read taken before the send recorded its outcome never
// sends the delivery again.
func (d *dispatcher) sendDue(ctx context.Context) {
	d.mu.Lock()
	for id, running := range d.inflight {
		if !running {
			delete(d.inflight, id)
		}
	}
	d.mu.Unlock()
	due, err := d.s.store.DueDeliveries(ctx, time.Now(), 100)
	if err != nil {
		if ctx.Err() == nil {
			d.s.log.WarnContext(ctx, "webhooks: due deliveries", "err", err)
		}
		return
	}
	for _, dl := range due {
		d.mu.Lock()
		_, busy := d.inflight[dl.ID]
		if !busy {
			d.inflight[dl.ID] = true
		}
		d.mu.Unlock()
		if busy {
			continue
		}
		select {
		case d.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer func() {
				<-d.sem
				d.mu.Lock()
				d.inflight[dl.ID] = false // finished; cleared before the next read
				d.mu.Unlock()
			}()
			d.send(ctx, dl)
		}()
	}
}

// send makes one attempt of a delivery and records its outcome.
func (d *dispatcher) send(ctx context.Context, dl store.Delivery) {
	cfg := d.s.cfg
	w, err := d.s.store.GetWebhook(ctx, "", dl.WebhookID)
	if err != nil {
		return // deleted meanwhile: its deliveries went with it
	}
	secret := w.Secret
	if d.s.cfg.Sealer != nil {
		if secret, err = d.s.cfg.Sealer.Open(w.Secret, w.ID+"/secret"); err != nil {
			d.s.log.ErrorContext(ctx, "webhooks: open secret", "webhook", w.ID, "err", err)
			return
		}
	}
	body, _ := json.Marshal(eventFrom(dl.Event))
	dl.Attempts++
	sent := time.Now()
	status, sendErr := d.client.Post(ctx, w.URL, secret, map[string]string{
		"X-Pt-Event":    dl.Event.Type,
		"X-Pt-Event-Id": strconv.FormatInt(dl.EventID, 10),
		"X-Pt-Delivery": strconv.FormatInt(dl.ID, 10),
		"X-Pt-Webhook":  w.ID,
	}, body)
	if sendErr == nil {
		crashpoint.Hit("webhook.sent") // delivered, not yet recorded: sent again after the restart
	}
	if ctx.Err() != nil {
		return // shutting down: the delivery stays pending, sent after the restart
	}
	dl.LastStatus, dl.LastError = status, ""
	switch {
	case sendErr == nil:
		dl.Status = store.DeliveryDelivered
		metrics.WebhookDelivery("delivered", time.Since(sent))
	case dl.Attempts >= cfg.MaxAttempts:
		dl.Status, dl.LastError = store.DeliveryFailed, sendErr.Error()
		metrics.WebhookDelivery("failed", time.Since(sent))
	default:
		dl.Status, dl.LastError = store.DeliveryPending, sendErr.Error()
		dl.NextAttemptAt = time.Now().Add(cfg.backoff(dl.Attempts))
		metrics.WebhookDelivery("retrying", time.Since(sent))
	}
	if err := d.s.store.UpdateDelivery(ctx, dl); err != nil && !errors.Is(err, store.ErrNotFound) {
		d.s.log.WarnContext(ctx, "webhooks: record delivery", "delivery", dl.ID, "err", err)
	}
	if sendErr != nil {
		d.s.log.InfoContext(ctx, "webhook delivery failed", "webhook", w.ID, "delivery", dl.ID, "attempt", dl.Attempts,
			"status", dl.Status, "err", sendErr)
	}
}
