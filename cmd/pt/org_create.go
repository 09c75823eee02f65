package main

import (
	"context"
	"flag"
	"fmt"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// orgCreate is `pt org create NAME`: make an organization and its first
// token. It needs the admin token in PT_TOKEN.
type orgCreate struct{ app *app }

const orgCreateSynopsis = "pt org create NAME [--json]"

// bind binds the flags; the returned run creates the org and prints its ID
// and token (shown only once).
func (c *orgCreate) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, `print {"org": {...}, "token": "..."} as JSON`)
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) != 1 || pos[0] == "" {
			return in.usageErr("want exactly one organization NAME")
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
}
