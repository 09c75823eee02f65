package platinum

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Webhook sends the org's events to a URL as signed JSON POSTs.
type Webhook struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Events are the delivered event types; empty means all.
	Events []string `json:"events"`
	// Secret signs deliveries. Only Create's answer has it: keep it.
	Secret    string    `json:"secret,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// WebhookCreate describes a new webhook. Secret empty means the server
// generates one (returned once, in Webhook.Secret).
type WebhookCreate struct {
	URL    string   `json:"url"`
	Events []string `json:"events,omitempty"`
	Secret string   `json:"secret,omitempty"`
}

// WebhookDelivery is one event sent (or being sent) to a webhook.
type WebhookDelivery struct {
	ID        int64  `json:"id"`
	WebhookID string `json:"webhook_id"`
	EventID   int64  `json:"event_id"`
	// Status is pending (retrying at NextAttemptAt), delivered or failed
	// (attempts used up).
	Status        string    `json:"status"`
	Attempts      int       `json:"attempts"`
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	LastStatus    int       `json:"last_status,omitempty"`
	LastError     string    `json:"last_error,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// WebhooksService manages webhooks. Get it from Client.Webhooks.
type WebhooksService struct {
	c *Client
}

// Create registers a webhook; it receives events committed from now on.
func (s *WebhooksService) Create(ctx context.Context, req WebhookCreate) (*Webhook, error) {
	return fetchJSON[Webhook](ctx, s.c, "POST", "/v1/webhooks", nil, req, "create webhook")
}

// List returns the org's webhooks, oldest first.
func (s *WebhooksService) List(ctx context.Context) ([]Webhook, error) {
	return nonNil(fetchRows[Webhook](ctx, s.c, "GET", "/v1/webhooks", nil, nil, "list webhooks"))
}

// Get returns one webhook (without its secret).
func (s *WebhooksService) Get(ctx context.Context, id string) (*Webhook, error) {
	return fetchJSON[Webhook](ctx, s.c, "GET", "/v1/webhooks/"+url.PathEscape(id), nil, nil, "webhook %s", id)
}

// Delete removes a webhook and its pending deliveries.
func (s *WebhooksService) Delete(ctx context.Context, id string) error {
	return callJSON(ctx, s.c, "DELETE", "/v1/webhooks/"+url.PathEscape(id), nil, nil, "delete webhook %s", id)
}

// Deliveries returns a webhook's latest deliveries, newest first.
func (s *WebhooksService) Deliveries(ctx context.Context, id string) ([]WebhookDelivery, error) {
	return nonNil(fetchRows[WebhookDelivery](ctx, s.c, "GET", "/v1/webhooks/"+url.PathEscape(id)+"/deliveries", nil, nil, "webhook %s deliveries", id))
}

// SignatureHeader is the header of a delivery's signature.
const SignatureHeader = "X-Pt-Signature"

// ErrBadSignature is returned by VerifyWebhook for a delivery that was not
// signed with the secret, was altered, or is too old.
var ErrBadSignature = errors.New("webhook signature does not verify")

// VerifyWebhook checks a delivery's X-Pt-Signature header
// ("t=<unix seconds>,v1=<hex>") against its raw body: v1 must be the
// HMAC-SHA256, keyed by secret, of "<unix seconds>.<body>", and t within
// tolerance of now (0 means 5 minutes), so a captured delivery cannot be
// replayed later. Pass the body exactly as received.
func VerifyWebhook(secret, header string, body []byte, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = 5 * time.Minute
	}
	var ts string
	var sigs []string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: malformed header %q", ErrBadSignature, header)
	}
	if d := time.Since(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %d is outside the %s tolerance", ErrBadSignature, sec, tolerance)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range sigs {
		got, err := hex.DecodeString(s)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrBadSignature
}
