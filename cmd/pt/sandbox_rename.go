package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxRename is `pt sandbox rename ID NAME` and `pt sandbox rename ID
// --clear`. Names are unique among the organization's live sandboxes.
type sandboxRename struct{ app *app }

const sandboxRenameSynopsis = "pt sandbox rename ID NAME [--json]\n       pt sandbox rename ID --clear [--json]"

// bind binds the flags; the returned run renames the sandbox (or clears its
// name) and prints the outcome.
func (c *sandboxRename) bind(fs *flag.FlagSet) runFunc {
	clearName := fs.Bool("clear", false, "remove the sandbox's name")
	asJSON := jsonFlag(fs, "print the sandbox as JSON")
	check := func(in *input) error {
		switch pos := in.pos; {
		case len(pos) == 0:
			return in.usageErr("want a sandbox ID and a NAME (or --clear)")
		case len(pos) == 1 && !*clearName:
			return in.usageErr("want a NAME, or --clear to remove the name")
		case len(pos) == 2 && *clearName:
			return in.usageErr("give a NAME or --clear, not both")
		case len(pos) > 2:
			return in.usageErr("unexpected argument %q", pos[2])
		case len(pos) == 2 && pos[1] == "":
			return in.usageErr("the NAME is empty; remove a name with --clear")
		}
		return nil
	}
	return callRun(c.app, check, func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Sandbox, error) {
		var sb *platinum.Sandbox
		var err error
		if *clearName {
			sb, err = cl.Sandboxes.ClearName(ctx, pos[0])
		} else {
			sb, err = cl.Sandboxes.Rename(ctx, pos[0], pos[1])
		}
		if platinum.IsCode(err, platinum.CodeInvalidRequest) {
			return nil, withHint(err, "") // the message says what a name may be; rename has no --name flag to point at
		}
		if err != nil {
			return nil, nameConflictHint(err, pos[len(pos)-1])
		}
		return sb, nil
	}, func(sb *platinum.Sandbox) error {
		if *asJSON {
			return printSandbox(c.app.stdout, sb, true)
		}
		if sb.Name == "" {
			fmt.Fprintf(c.app.stdout, "sandbox %s: name cleared\n", sb.ID)
		} else {
			fmt.Fprintf(c.app.stdout, "sandbox %s: renamed to %s\n", sb.ID, sb.Name)
		}
		return nil
	})
}

// nameConflictHint explains a conflict that is about a taken name (one
// without a state), which the generic conflict hint would misread.
func nameConflictHint(err error, name string) error {
	var ae *platinum.APIError
	if errors.As(err, &ae) && ae.Code == platinum.CodeConflict && ae.State() == "" && len(ae.Children()) == 0 {
		return withHint(err, fmt.Sprintf("another live sandbox is named %q: find it with `pt sandbox list`, rename it or delete it, or pick another name", name))
	}
	return err
}
