package main

import (
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
	asJSON := fs.Bool("json", false, "print the webhook (with its secret) as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) != 1 {
			return in.usageErr("want one URL")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		w, err := cl.Webhooks.Create(ctx, platinum.WebhookCreate{URL: pos[0], Events: events, Secret: *secret})
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, w)
		}
		fmt.Fprintf(c.app.stdout, "%s\nsecret: %s\n", w.ID, w.Secret)
		fmt.Fprintln(c.app.stderr, "keep the secret: it is not shown again; verify X-Pt-Signature with it")
		return nil
	}
}

// webhookList is `pt webhook list`.
type webhookList struct{ app *app }

const webhookListSynopsis = "pt webhook list [--json]"

// bind binds the flags; the returned run prints the org's webhooks.
func (c *webhookList) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, `print {"rows": [...]} as JSON`)
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) > 0 {
			return in.usageErr("unexpected argument %q", pos[0])
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		rows, err := cl.Webhooks.List(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, struct {
				Rows []platinum.Webhook `json:"rows"`
			}{rows})
		}
		tw := table(c.app.stdout)
		fmt.Fprintln(tw, "ID\tURL\tEVENTS\tCREATED")
		for _, w := range rows {
			evs := strings.Join(w.Events, ",")
			if evs == "" {
				evs = "all"
			}
			fmt.Fprintln(tw, strings.Join([]string{w.ID, w.URL, evs, formatTime(w.CreatedAt)}, "\t"))
		}
		return tw.Flush()
	}
}

// webhookRm is `pt webhook rm ID...`.
type webhookRm struct{ app *app }

const webhookRmSynopsis = "pt webhook rm ID [ID...]"

// bind binds the flags; the returned run deletes each webhook and prints its
// ID.
func (c *webhookRm) bind(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) == 0 {
			return in.usageErr("want at least one webhook ID")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		for _, id := range pos {
			if err := cl.Webhooks.Delete(ctx, id); err != nil {
				return err
			}
			fmt.Fprintln(c.app.stdout, id)
		}
		return nil
	}
}

// webhookDeliveries is `pt webhook deliveries ID`.
type webhookDeliveries struct{ app *app }

const webhookDeliveriesSynopsis = "pt webhook deliveries ID [--json]"

// bind binds the flags; the returned run prints a webhook's latest
// deliveries, newest first.
func (c *webhookDeliveries) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, `print {"rows": [...]} as JSON`)
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) != 1 {
			return in.usageErr("want one webhook ID")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		rows, err := cl.Webhooks.Deliveries(ctx, pos[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, struct {
				Rows []platinum.WebhookDelivery `json:"rows"`
			}{rows})
		}
		tw := table(c.app.stdout)
		fmt.Fprintln(tw, "ID\tEVENT\tSTATUS\tATTEMPTS\tLAST\tNEXT\tERROR")
		for _, d := range rows {
			last := "-"
			if d.LastStatus != 0 {
				last = strconv.Itoa(d.LastStatus)
			}
			fmt.Fprintln(tw, strings.Join([]string{strconv.FormatInt(d.ID, 10), strconv.FormatInt(d.EventID, 10), d.Status,
				strconv.Itoa(d.Attempts), last, formatTime(d.NextAttemptAt), orDash(d.LastError)}, "\t"))
		}
		return tw.Flush()
	}
}

// webhookGet is `pt webhook get ID`.
type webhookGet struct{ app *app }

const webhookGetSynopsis = "pt webhook get ID [--json]"

// bind binds the flags; the returned run prints one webhook (its secret is
// never shown again).
func (c *webhookGet) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print the webhook as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) != 1 {
			return in.usageErr("want one webhook ID")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		w, err := cl.Webhooks.Get(ctx, pos[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, w)
		}
		evs := strings.Join(w.Events, ",")
		if evs == "" {
			evs = "all"
		}
		tw := table(c.app.stdout)
		for _, kv := range [][2]string{{"id", w.ID}, {"url", w.URL}, {"events", evs}, {"created", formatTime(w.CreatedAt)}} {
			fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
		}
		return tw.Flush()
	}
}
