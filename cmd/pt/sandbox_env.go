package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxEnv is `pt sandbox env ID KEY=VALUE... [--unset KEY]...`: merge
// variables into a sandbox's environment, e.g. to rotate a credential.
// Keys not named are left as they are; values are never printed.
type sandboxEnv struct{ app *app }

const sandboxEnvSynopsis = "pt sandbox env ID KEY=VALUE... [--unset KEY]... [--json]\n\n" +
	"  Set and remove environment variables of a sandbox; keys not named stay as they are.\n" +
	"  New commands see the change at once; processes already running and services\n" +
	"  started at boot keep the old values until the sandbox's next cold boot."

// bind binds the flags; the returned run sends the change and prints the
// sandbox's keys and when it applies.
func (c *sandboxEnv) bind(fs *flag.FlagSet) runFunc {
	var (
		unset  listFlag
		asJSON bool
	)
	fs.Var(&unset, "unset", "remove `KEY` (repeatable)")
	fs.BoolVar(&asJSON, "json", false, `print {"id", "state", "env_keys", "applies"} as JSON`)
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		usage := in.usage
		if len(pos) == 0 {
			return usageErr(usage, "want a sandbox ID, then KEY=VALUE pairs or --unset KEY")
		}
		id, set := pos[0], map[string]string{}
		for _, kv := range pos[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usageErr(usage, "want KEY=VALUE, got %q; remove a key with --unset KEY", kv)
			}
			set[k] = v
		}
		for _, k := range unset {
			if _, ok := set[k]; ok {
				return usageErr(usage, "%s is both set and unset", k)
			}
		}
		if len(set) == 0 && len(unset) == 0 {
			return usageErr(usage, "nothing to change: give KEY=VALUE or --unset KEY")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		res, err := cl.Sandboxes.UpdateEnv(ctx, id, set, unset...)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(c.app.stdout, res)
		}
		fmt.Fprintf(c.app.stdout, "env keys: %s\napplies: %s\n", orDash(strings.Join(res.EnvKeys, ", ")), res.Applies)
		switch res.Applies {
		case platinum.AppliesNextExec:
			fmt.Fprintln(c.app.stderr, "new commands see the change now; processes already running and services started at boot keep the old values until the next cold boot")
		case platinum.AppliesNextStart:
			fmt.Fprintf(c.app.stderr, "the sandbox is %s; it sees the change when it next starts\n", res.State)
		}
		return nil
	}
}
