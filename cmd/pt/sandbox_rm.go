package main

import (
	"context"
	"fmt"
)

// sandboxRm is `pt sandbox rm ID...`: delete sandboxes. Deletion finishes in
// the background; pt returns once ptd has accepted it.
type sandboxRm struct{ app *app }

const sandboxRmSynopsis = "pt sandbox rm ID [ID...]"

// Run deletes each sandbox, printing the IDs it deleted. It goes on past
// failures and reports them all at the end.
func (c *sandboxRm) Run(ctx context.Context, args []string) error {
	fs := newFlags("pt sandbox rm")
	pos, err := parseArgs(fs, sandboxRmSynopsis, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErr(usageText(fs, sandboxRmSynopsis), "want at least one sandbox ID")
	}
	cl, err := c.app.client()
	if err != nil {
		return err
	}
	var failed []string
	var lastErr error
	for _, id := range pos {
		if _, err := cl.Sandboxes.Delete(ctx, id); err != nil {
			if len(pos) == 1 {
				return err
			}
			fmt.Fprintf(c.app.stderr, "pt: %s: %s\n", id, message(err))
			failed, lastErr = append(failed, id), err
			continue
		}
		fmt.Fprintln(c.app.stdout, id)
	}
	if len(failed) > 0 {
		return withHint(fmt.Errorf("could not delete %s", sandboxIDs(failed)), c.app.hint(lastErr))
	}
	return nil
}
