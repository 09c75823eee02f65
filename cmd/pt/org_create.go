package main

import (
	"context"
	"fmt"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// orgCreate is `pt org create NAME`: make an organization and its first
// token. It needs the admin token in PT_TOKEN.
type orgCreate struct{ app *app }

const orgCreateSynopsis = "pt org create NAME [--json]"

// Run creates the org and prints its ID and token (shown only once).
func (c *orgCreate) Run(ctx context.Context, args []string) error {
	fs := newFlags("pt org create")
	asJSON := fs.Bool("json", false, `print {"org": {...}, "token": "..."} as JSON`)
	pos, err := parseArgs(fs, orgCreateSynopsis, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] == "" {
		return usageErr(usageText(fs, orgCreateSynopsis), "want exactly one organization NAME")
	}
	cl, err := c.app.client()
	if err != nil {
		return err
	}
	org, token, err := cl.Orgs.Create(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(c.app.stdout, struct {
			Org   *platinum.Org `json:"org"`
			Token string        `json:"token"`
		}{org, token})
	}
	tw := table(c.app.stdout)
	fmt.Fprintf(tw, "ID:\t%s\nName:\t%s\nToken:\t%s\n", org.ID, org.Name, token)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(c.app.stderr, "save the token now: it is not shown again. Use it with: export PT_TOKEN=<token>")
	return nil
}
