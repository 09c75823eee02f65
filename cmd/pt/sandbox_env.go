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
	set := map[string]string{}
	check := checks(someArgs("want a sandbox ID, then KEY=VALUE pairs or --unset KEY"), func(in *input) error {
		for _, kv := range in.pos[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return in.usageErr("want KEY=VALUE, got %q; remove a key with --unset KEY", kv)
			}
			set[k] = v
		}
		for _, k := range unset {
			if _, ok := set[k]; ok {
				return in.usageErr("%s is both set and unset", k)
			}
		}
		if len(set) == 0 && len(unset) == 0 {
			return in.usageErr("nothing to change: give KEY=VALUE or --unset KEY")
		}
		return nil
	})
	return callRun(c.app, check, func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.EnvResult, error) {
		return cl.Sandboxes.UpdateEnv(ctx, pos[0], set, unset...)
	}, jsonOr(c.app, &asJSON, func(res *platinum.EnvResult) error {
		fmt.Fprintf(c.app.stdout, "env keys: %s\napplies: %s\n", orDash(strings.Join(res.EnvKeys, ", ")), res.Applies)
		switch res.Applies {
		case platinum.AppliesNextExec:
			fmt.Fprintln(c.app.stderr, "new commands see the change now; processes already running and services started at boot keep the old values until the next cold boot")
		case platinum.AppliesNextStart:
			fmt.Fprintf(c.app.stderr, "the sandbox is %s; it sees the change when it next starts\n", res.State)
		}
		return nil
	}))
}
