package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// The helpers below are the shape most verbs share: check the positional
// arguments, build the SDK client, make one call, print the result as a
// table or field list, or as JSON with --json. Each verb supplies only what
// is its own, so the shared steps (and their messages) cannot drift apart.

// rowsJSONUsage is the --json usage of the verbs that print {"rows": [...]}.
const rowsJSONUsage = `print {"rows": [...]} as JSON`

// jsonFlag declares a verb's --json flag with its usage text.
func jsonFlag(fs *flag.FlagSet, usage string) *bool {
	return fs.Bool("json", false, usage)
}

// argCheck checks a verb's positional arguments and flags before the
// client is built, returning a usage error when they are wrong; some also
// finish the verb's request from them.
type argCheck func(in *input) error

// noArgs refuses every positional argument.
func noArgs(in *input) error {
	if len(in.pos) > 0 {
		return in.usageErr("unexpected argument %q", in.pos[0])
	}
	return nil
}

// exactArgs wants exactly n positional arguments; msg says what they are.
func exactArgs(n int, msg string) argCheck {
	return func(in *input) error {
		if len(in.pos) != n {
			return in.usageErr("%s", msg)
		}
		return nil
	}
}

// oneName wants exactly one positional argument, not empty.
func oneName(msg string) argCheck {
	return func(in *input) error {
		if len(in.pos) != 1 || in.pos[0] == "" {
			return in.usageErr("%s", msg)
		}
		return nil
	}
}

// someArgs wants at least one positional argument.
func someArgs(msg string) argCheck {
	return func(in *input) error {
		if len(in.pos) == 0 {
			return in.usageErr("%s", msg)
		}
		return nil
	}
}

// checks runs each check in turn and stops at the first error: the
// argument count first, then what the verb checks of its own.
func checks(cs ...argCheck) argCheck {
	return func(in *input) error {
		for _, c := range cs {
			if err := c(in); err != nil {
				return err
			}
		}
		return nil
	}
}

// callFunc makes a verb's SDK call with its positional arguments.
type callFunc[T any] func(ctx context.Context, cl *platinum.Client, pos []string) (T, error)

// callRun is the run of a verb that checks its arguments, makes one SDK
// call and prints what the call returned with show.
func callRun[T any](a *app, check argCheck, call callFunc[T], show func(T) error) runFunc {
	return func(ctx context.Context, in *input) error {
		if err := check(in); err != nil {
			return err
		}
		cl, err := a.client()
		if err != nil {
			return err
		}
		v, err := call(ctx, cl, in.pos)
		if err != nil {
			return err
		}
		return show(v)
	}
}

// jsonOr prints a value as JSON when *asJSON is set, else with text.
func jsonOr[T any](a *app, asJSON *bool, text func(T) error) func(T) error {
	return func(v T) error {
		if *asJSON {
			return writeJSON(a.stdout, v)
		}
		return text(v)
	}
}

// jsonOrLine prints a value as JSON when *asJSON is set, else the one line
// that line renders.
func jsonOrLine[T any](a *app, asJSON *bool, line func(T) string) func(T) error {
	return jsonOr(a, asJSON, func(v T) error {
		fmt.Fprintln(a.stdout, line(v))
		return nil
	})
}

// listRun is the run of a list verb: callRun printing the rows as
// {"rows": [...]} with --json, else as a table under header with one line
// of cells per row.
func listRun[T any](a *app, asJSON *bool, check argCheck, call callFunc[[]T], header string, cells func(*T) []string) runFunc {
	return callRun(a, check, call, func(rows []T) error {
		if *asJSON {
			return writeRows(a.stdout, rows)
		}
		return writeTable(table(a.stdout), header, rows, cells)
	})
}

// writeRows prints rows as the {"rows": [...]} document of the list verbs.
func writeRows[T any](w io.Writer, rows []T) error {
	return writeJSON(w, struct {
		Rows []T `json:"rows"`
	}{rows})
}

// writeTable prints header, then each row's cells, aligned by tw.
func writeTable[T any](tw *tabwriter.Writer, header string, rows []T, cells func(*T) []string) error {
	fmt.Fprintln(tw, header)
	for i := range rows {
		fmt.Fprintln(tw, strings.Join(cells(&rows[i]), "\t"))
	}
	return tw.Flush()
}

// deleteRun is the run of a plain `rm ID...` verb: delete each ID in turn,
// printing it, and stop at the first failure.
func deleteRun(a *app, msg string, del func(ctx context.Context, cl *platinum.Client, id string) error) runFunc {
	return callRun(a, someArgs(msg), func(ctx context.Context, cl *platinum.Client, pos []string) (struct{}, error) {
		for _, id := range pos {
			if err := del(ctx, cl, id); err != nil {
				return struct{}{}, err
			}
			fmt.Fprintln(a.stdout, id)
		}
		return struct{}{}, nil
	}, noOutput)
}

// printFields prints "key:\tvalue" lines, aligned: a record's field list.
func printFields(w io.Writer, kvs ...[2]string) error {
	tw := table(w)
	for _, kv := range kvs {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	return tw.Flush()
}

// oneSandboxID is the argument check of the verbs that take one sandbox ID.
var oneSandboxID = exactArgs(1, "want exactly one sandbox ID")

// noOutput is the show of verbs that print as they go.
func noOutput(struct{}) error { return nil }

// narrowTable is the tighter table of the snapshot and version lists.
func narrowTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// listVerb is a verb that prints rows: a table under header, one line of
// cells per row, or {"rows": [...]} with --json.
type listVerb[T any] struct {
	app *app
	// flags declares the verb's own flags besides --json (nil: none).
	flags  func(fs *flag.FlagSet)
	check  argCheck
	list   callFunc[[]T]
	header string
	cells  func(*T) []string
}

// bind binds the verb's flags and --json; the returned run lists the rows.
func (v *listVerb[T]) bind(fs *flag.FlagSet) runFunc {
	if v.flags != nil {
		v.flags(fs)
	}
	asJSON := jsonFlag(fs, rowsJSONUsage)
	return listRun(v.app, asJSON, v.check, v.list, v.header, v.cells)
}

// listAll is a list verb without arguments whose rows are what one of the
// SDK's argument-less List methods returns; method picks it from the
// client (cl.Hosts.List, cl.Projects.List, ...).
func listAll[T any](a *app, header string, method func(*platinum.Client) func(context.Context) ([]T, error), cells func(*T) []string) verb {
	return &listVerb[T]{app: a, check: noArgs, header: header,
		list: func(ctx context.Context, cl *platinum.Client, _ []string) ([]T, error) {
			return method(cl)(ctx)
		},
		cells: cells}
}

// onSandbox is the call of a verb whose one argument is a sandbox ID: the
// SandboxesService method named by its method expression, e.g.
// (*platinum.SandboxesService).Get, on that ID.
func onSandbox[T any](method func(*platinum.SandboxesService, context.Context, string) (T, error)) callFunc[T] {
	return func(ctx context.Context, cl *platinum.Client, pos []string) (T, error) {
		return method(cl.Sandboxes, ctx, pos[0])
	}
}
