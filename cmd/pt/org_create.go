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
	asJSON := jsonFlag(fs, `print {"org": {...}, "token": "..."} as JSON`)
	type created struct {
		Org   *platinum.Org `json:"org"`
		Token string        `json:"token"`
	}
	return callRun(c.app, oneName("want exactly one organization NAME"), func(ctx context.Context, cl *platinum.Client, pos []string) (created, error) {
		org, token, err := cl.Orgs.Create(ctx, pos[0])
		return created{org, token}, err
	}, jsonOr(c.app, asJSON, func(v created) error {
		if err := printFields(c.app.stdout, [2]string{"ID", v.Org.ID}, [2]string{"Name", v.Org.Name}, [2]string{"Token", v.Token}); err != nil {
			return err
		}
		fmt.Fprintln(c.app.stderr, "save the token now: it is not shown again. Use it with: export PT_TOKEN=<token>")
		return nil
	}))
}
