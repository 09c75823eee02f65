package store

import (
	"context"
	"time"
)

// EventQuery selects events for an org's feed (GET /v1/events).
type EventQuery struct {
	// OrgID is required: a feed never mixes orgs.
	OrgID string
	// AfterID is the cursor: only events with a greater ID.
	AfterID int64
	// SandboxID, when set, keeps only that sandbox's events.
	SandboxID string
	// Types, when set, keeps only events of those types.
	Types []string
	// Limit caps the page (<= 0: no limit).
	Limit int
}

// Webhook is an org's subscription to its events by HTTP POST.
type Webhook struct {
	ID    string // whk_…
	OrgID string
	URL   string
	// Events are the event types delivered; empty means every type.
	Events []string
	// Secret signs deliveries; stored as the caller gives it (the control
	// plane seals it first when it can).
	Secret string
	// Cursor is the last event ID fanned out to this webhook. CreateWebhook
	// sets it to the newest event's ID, so a webhook never receives events
	// older than itself.
	Cursor    int64
	CreatedAt time.Time
}

// DeliveryStatus is where a webhook delivery is.
type DeliveryStatus string

// Delivery statuses: pending deliveries are sent (again) at NextAttemptAt;
// failed ones used up their attempts.
const (
	DeliveryPending   DeliveryStatus = "pending"
	DeliveryDelivered DeliveryStatus = "delivered"
	DeliveryFailed    DeliveryStatus = "failed"
)

// Delivery is one event to send to one webhook.
type Delivery struct {
	ID            int64
	WebhookID     string
	OrgID         string
	EventID       int64
	Status        DeliveryStatus
	Attempts      int
	NextAttemptAt time.Time
	// LastStatus is the receiver's last HTTP status (0: no answer).
	LastStatus int
	LastError  string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Event is the delivered event; DueDeliveries fills it in.
	Event Event
}

// ArtifactKind says what an artifact holds.
type ArtifactKind string

// Artifact kinds: a file's bytes, or a directory as a tar stream.
const (
	ArtifactFile      ArtifactKind = "file"
	ArtifactDirectory ArtifactKind = "directory"
)

// Artifact is a file or directory exported from a sandbox into the object
// store. It is independent of the sandbox's record and outlives it.
type Artifact struct {
	ID          string // art_…
	OrgID       string
	SandboxID   string
	Name        string
	Path        string // the path in the sandbox it was exported from
	Kind        ArtifactKind
	ContentType string
	SizeBytes   int64
	SHA256      string // hex, of the stored bytes
	Bucket      string
	Key         string
	CreatedAt   time.Time
}

// Feeds is the part of Store behind the event stream, webhooks and
// artifacts (docs/events-and-webhooks.md). It is embedded in Store.
type Feeds interface {
	// ListEvents returns the org's events matching q, oldest first.
	ListEvents(ctx context.Context, q EventQuery) ([]Event, error)

	// CreateWebhook inserts w, setting its Cursor to the newest event's ID
	// (0 when there is none) and a zero CreatedAt to now; it returns the
	// stored webhook. ErrConflict if the ID exists.
	CreateWebhook(ctx context.Context, w Webhook) (Webhook, error)
	// GetWebhook returns ErrNotFound if absent or in another org; an empty
	// orgID matches any org (for internal callers only).
	GetWebhook(ctx context.Context, orgID, id string) (Webhook, error)
	// ListWebhooks returns an org's webhooks, oldest first; an empty orgID
	// lists every org's (for the dispatcher).
	ListWebhooks(ctx context.Context, orgID string) ([]Webhook, error)
	// DeleteWebhook removes the webhook and its deliveries; ErrNotFound if
	// absent or in another org.
	DeleteWebhook(ctx context.Context, orgID, id string) error
	// AdvanceWebhook moves the webhook's cursor from `from` to `to` and
	// queues a pending delivery (due now) of each event in eventIDs, in
	// one transaction. ErrConflict if the cursor is not `from` (another
	// dispatcher advanced it), ErrNotFound if the webhook is gone. An
	// event already queued for the webhook is not queued twice.
	AdvanceWebhook(ctx context.Context, id string, from, to int64, eventIDs []int64) error
	// DueDeliveries returns up to limit pending deliveries whose
	// NextAttemptAt is not after now, oldest first, with their Event.
	DueDeliveries(ctx context.Context, now time.Time, limit int) ([]Delivery, error)
	// UpdateDelivery writes d's Status, Attempts, NextAttemptAt,
	// LastStatus and LastError; ErrNotFound if it is gone (its webhook was
	// deleted meanwhile).
	UpdateDelivery(ctx context.Context, d Delivery) error
	// ListDeliveries returns a webhook's deliveries, newest first, at most
	// limit (<= 0: no limit); ErrNotFound if the webhook is absent or in
	// another org.
	ListDeliveries(ctx context.Context, orgID, webhookID string, limit int) ([]Delivery, error)
	// PruneDeliveries deletes finished (delivered or failed) deliveries
	// last updated before `before` and returns how many it deleted.
	PruneDeliveries(ctx context.Context, before time.Time) (int64, error)
	// PruneEvents deletes up to limit events created before `before`,
	// oldest first, except events a pending webhook delivery still needs
	// and the usage history (created, state_changed, resized) of sandboxes
	// whose record exists; it raises the pruned-through watermark to the
	// highest ID it deleted and returns how many it deleted.
	PruneEvents(ctx context.Context, before time.Time, limit int) (int64, error)
	// EventsPrunedThrough returns the highest event ID PruneEvents ever
	// deleted (0 when none): a cursor below it may have missed events.
	EventsPrunedThrough(ctx context.Context) (int64, error)

	// CreateArtifact inserts a; a zero CreatedAt is set to now. It returns
	// the stored artifact. ErrConflict if the ID exists.
	CreateArtifact(ctx context.Context, a Artifact) (Artifact, error)
	// GetArtifact returns ErrNotFound if absent or in another org.
	GetArtifact(ctx context.Context, orgID, id string) (Artifact, error)
	// ListArtifacts returns an org's artifacts, newest first, optionally
	// only those of one sandbox.
	ListArtifacts(ctx context.Context, orgID, sandboxID string) ([]Artifact, error)
	// DeleteArtifact removes the record and returns it (so the caller can
	// delete its object); ErrNotFound if absent or in another org.
	DeleteArtifact(ctx context.Context, orgID, id string) (Artifact, error)
}
