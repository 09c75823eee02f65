package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxRm is `pt sandbox rm ID...`: delete sandboxes. Deletion finishes in
// the background; pt returns once ptd has accepted it.
type sandboxRm struct{ app *app }

const sandboxRmSynopsis = "pt sandbox rm ID [ID...]"

// bind binds the flags; the returned run deletes each sandbox, printing the
// IDs it deleted. It goes on past failures and reports them all at the end.
// A parent refused because of live children is tried again after the others,
// so `pt sandbox rm PARENT CHILD...` works in any order.
func (c *sandboxRm) bind(fs *flag.FlagSet) runFunc {
	return callRun(c.app, someArgs("want at least one sandbox ID"), func(ctx context.Context, cl *platinum.Client, pos []string) (struct{}, error) {
		var failed, parents []string
		var lastErr error
		del := func(id string, retry bool) {
			_, err := cl.Sandboxes.Delete(ctx, id)
			var ae *platinum.APIError
			switch {
			case err == nil:
				fmt.Fprintln(c.app.stdout, id)
			case !retry && errors.As(err, &ae) && len(ae.Children()) > 0 && len(pos) > 1:
				parents = append(parents, id) // its children may be later in pos
			default:
				if len(pos) == 1 {
					lastErr = err
					return
				}
				fmt.Fprintf(c.app.stderr, "pt: %s: %s\n", id, message(err))
				failed, lastErr = append(failed, id), err
			}
		}
		for _, id := range pos {
			del(id, false)
		}
		for _, id := range slices.Backward(parents) {
			del(id, true)
		}
		if len(pos) == 1 && lastErr != nil {
			return struct{}{}, lastErr
		}
		if len(failed) > 0 {
			return struct{}{}, withHint(fmt.Errorf("could not delete %s", sandboxIDs(failed)), c.app.hint(lastErr))
		}
		return struct{}{}, nil
	}, noOutput)
}
