package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// webhookCreate is `pt webhook create URL`.
type webhookCreate struct{ app *app }

const webhookCreateSynopsis = "pt webhook create URL [--event TYPE]... [--secret S] [--json]"

// bind binds the flags; the returned run registers the webhook and prints
// its ID and signing secret (shown only this once).
func (c *webhookCreate) bind(fs *flag.FlagSet) runFunc {
	var events listFlag
	fs.Var(&events, "event", "deliver only this event type (repeatable; default: all)")
	secret := fs.String("secret", "", "signing secret, 16 to 256 characters (default: generated)")
	asJSON := jsonFlag(fs, "print the webhook (with its secret) as JSON")
	return callRun(c.app, exactArgs(1, "want one URL"), func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Webhook, error) {
		return cl.Webhooks.Create(ctx, platinum.WebhookCreate{URL: pos[0], Events: events, Secret: *secret})
	}, jsonOr(c.app, asJSON, func(w *platinum.Webhook) error {
		fmt.Fprintf(c.app.stdout, "%s\nsecret: %s\n", w.ID, w.Secret)
		fmt.Fprintln(c.app.stderr, "keep the secret: it is not shown again; verify X-Pt-Signature with it")
		return nil
	}))
}

const webhookListSynopsis = "pt webhook list [--json]"

// webhookList is `pt webhook list`: the org's webhooks.
func webhookList(a *app) verb {
	return listAll(a, "ID\tURL\tEVENTS\tCREATED",
		func(cl *platinum.Client) func(context.Context) ([]platinum.Webhook, error) { return cl.Webhooks.List },
		func(w *platinum.Webhook) []string {
			return []string{w.ID, w.URL, webhookEvents(w), formatTime(w.CreatedAt)}
		})
}

// webhookEvents lists the event types a webhook receives ("all": no filter).
func webhookEvents(w *platinum.Webhook) string {
	return cmp.Or(strings.Join(w.Events, ","), "all")
}

// webhookRm is `pt webhook rm ID...`.
type webhookRm struct{ app *app }

const webhookRmSynopsis = "pt webhook rm ID [ID...]"

// bind binds the flags; the returned run deletes each webhook and prints its
// ID.
func (c *webhookRm) bind(fs *flag.FlagSet) runFunc {
	return deleteRun(c.app, "want at least one webhook ID", func(ctx context.Context, cl *platinum.Client, id string) error {
		return cl.Webhooks.Delete(ctx, id)
	})
}

const webhookDeliveriesSynopsis = "pt webhook deliveries ID [--json]"

// webhookDeliveries is `pt webhook deliveries ID`: a webhook's latest
// deliveries, newest first.
func webhookDeliveries(a *app) verb {
	return &listVerb[platinum.WebhookDelivery]{app: a, check: exactArgs(1, "want one webhook ID"), header: "ID\tEVENT\tSTATUS\tATTEMPTS\tLAST\tNEXT\tERROR",
		list: func(ctx context.Context, cl *platinum.Client, pos []string) ([]platinum.WebhookDelivery, error) {
			return cl.Webhooks.Deliveries(ctx, pos[0])
		},
		cells: func(d *platinum.WebhookDelivery) []string {
			last := "-"
			if d.LastStatus != 0 {
				last = strconv.Itoa(d.LastStatus)
			}
			return []string{strconv.FormatInt(d.ID, 10), strconv.FormatInt(d.EventID, 10), d.Status,
				strconv.Itoa(d.Attempts), last, formatTime(d.NextAttemptAt), orDash(d.LastError)}
		}}
}

// webhookGet is `pt webhook get ID`.
type webhookGet struct{ app *app }

const webhookGetSynopsis = "pt webhook get ID [--json]"

// bind binds the flags; the returned run prints one webhook (its secret is
// never shown again).
func (c *webhookGet) bind(fs *flag.FlagSet) runFunc {
	asJSON := jsonFlag(fs, "print the webhook as JSON")
	return callRun(c.app, exactArgs(1, "want one webhook ID"), func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Webhook, error) {
		return cl.Webhooks.Get(ctx, pos[0])
	}, jsonOr(c.app, asJSON, func(w *platinum.Webhook) error {
		return printFields(c.app.stdout, [2]string{"id", w.ID}, [2]string{"url", w.URL}, [2]string{"events", webhookEvents(w)},
			[2]string{"created", formatTime(w.CreatedAt)})
	}))
}
