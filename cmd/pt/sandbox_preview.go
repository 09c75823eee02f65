package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxPreview is `pt sandbox preview ID PORT [--expires 1h] [--public |
// --private] [--revoke]`: prints a port's preview URLs and token.
type sandboxPreview struct{ app *app }

const sandboxPreviewSynopsis = "pt sandbox preview ID PORT [--expires DURATION] [--public | --private] [--revoke] [--json]\n\n" +
	"  Prints the URLs that reach PORT of the sandbox through ptd's preview proxy, and the\n" +
	"  token requests must carry (header X-Pt-Preview-Token, or the browser URL once).\n" +
	"  A request to a stopped sandbox starts it unless its auto-resume is off.\n" +
	"  --public lets anyone reach the port without a token; --private undoes it;\n" +
	"  --revoke ends every token issued so far for the port."

// bind binds the flags; the returned run prints the preview URLs.
func (c *sandboxPreview) bind(fs *flag.FlagSet) runFunc {
	var (
		expires                       time.Duration
		public, private, revoke, asJS bool
	)
	fs.DurationVar(&expires, "expires", 0, "token lifetime, e.g. `1h` (default: until revoked)")
	fs.BoolVar(&public, "public", false, "make the port reachable without a token")
	fs.BoolVar(&private, "private", false, "require a token again")
	fs.BoolVar(&revoke, "revoke", false, "end every token issued so far for the port")
	fs.BoolVar(&asJS, "json", false, "print the result as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		usage := in.usage
		if len(pos) != 2 {
			return usageErr(usage, "want a sandbox ID and a PORT")
		}
		port, err := strconv.Atoi(pos[1])
		if err != nil || port < 1 || port > 65535 {
			return usageErr(usage, "PORT must be a number 1-65535")
		}
		if public && private {
			return usageErr(usage, "--public and --private contradict each other")
		}
		if expires < 0 || (expires > 0 && expires < time.Second) {
			return usageErr(usage, "--expires must be at least 1s")
		}
		id := pos[0]
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		if revoke {
			if err := cl.Sandboxes.RevokePreview(ctx, id, port); err != nil {
				return err
			}
			fmt.Fprintf(c.app.stderr, "revoked every token of port %d; the port is private\n", port)
		}
		if public || private {
			if _, err := cl.Sandboxes.SetPreviewPublic(ctx, id, port, public); err != nil {
				return err
			}
		}
		u, err := cl.Sandboxes.PreviewURL(ctx, id, port, &platinum.PreviewOptions{ExpiresIn: expires})
		if err != nil {
			return err
		}
		if asJS {
			return writeJSON(c.app.stdout, u)
		}
		w := c.app.stdout
		fmt.Fprintf(w, "url:          %s\n", u.URL)
		fmt.Fprintf(w, "path url:     %s\n", u.PathURL)
		fmt.Fprintf(w, "browser url:  %s\n", u.BrowserURL)
		fmt.Fprintf(w, "token:        %s\n", u.Token)
		exp := "never (until revoked)"
		if u.ExpiresAt != nil {
			exp = formatTime(*u.ExpiresAt)
		}
		fmt.Fprintf(w, "expires:      %s\n", exp)
		fmt.Fprintf(w, "public:       %v\n", u.Public)
		if !u.Public {
			fmt.Fprintf(c.app.stderr, "send the token: curl -H '%s: %s' %s\n", platinum.PreviewTokenHeader, u.Token, u.PathURL)
		}
		return nil
	}
}
