package httpapi

import (
	"net/http"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/events"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

type webhookView struct {
	ID     string   `json:"id"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	// Secret is only in the create answer.
	Secret    string `json:"secret,omitempty"`
	CreatedAt string `json:"created_at"`
}

func viewWebhook(w events.Webhook) webhookView {
	evs := w.Events
	if evs == nil {
		evs = []string{}
	}
	return webhookView{ID: w.ID, URL: w.URL, Events: evs, Secret: w.Secret, CreatedAt: sandbox.FormatTime(w.CreatedAt)}
}

func (a *API) createWebhook(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b struct {
		URL    string   `json:"url"`
		Events []string `json:"events"`
		Secret string   `json:"secret"`
	}
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	return respond(w, http.StatusCreated, viewWebhook)(a.ev.CreateWebhook(r.Context(), p, events.WebhookRequest{URL: b.URL, Events: b.Events, Secret: b.Secret}))
}

func (a *API) listWebhooks(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respondRows(w, "rows", viewWebhook)(a.ev.ListWebhooks(r.Context(), p))
}

func (a *API) getWebhook(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respond(w, http.StatusOK, viewWebhook)(a.ev.GetWebhook(r.Context(), p, r.PathValue("id")))
}

func (a *API) deleteWebhook(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return noContent(w, a.ev.DeleteWebhook(r.Context(), p, r.PathValue("id")))
}

type deliveryView struct {
	ID            int64  `json:"id"`
	WebhookID     string `json:"webhook_id"`
	EventID       int64  `json:"event_id"`
	Status        string `json:"status"`
	Attempts      int    `json:"attempts"`
	NextAttemptAt string `json:"next_attempt_at,omitempty"`
	LastStatus    int    `json:"last_status,omitempty"`
	LastError     string `json:"last_error,omitempty"`
	CreatedAt     string `json:"created_at"`
	UpdatedAt     string `json:"updated_at"`
}

func (a *API) webhookDeliveries(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	limit, err := intParam(r.URL.Query().Get("limit"), "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	return respondRows(w, "rows", viewDelivery)(a.ev.WebhookDeliveries(r.Context(), p, r.PathValue("id"), limit))
}

func viewDelivery(d store.Delivery) deliveryView {
	v := deliveryView{ID: d.ID, WebhookID: d.WebhookID, EventID: d.EventID, Status: string(d.Status),
		Attempts: d.Attempts, LastStatus: d.LastStatus, LastError: d.LastError,
		CreatedAt: sandbox.FormatTime(d.CreatedAt), UpdatedAt: sandbox.FormatTime(d.UpdatedAt)}
	if d.Status == store.DeliveryPending {
		v.NextAttemptAt = sandbox.FormatTime(d.NextAttemptAt)
	}
	return v
}
