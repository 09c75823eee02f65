package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// eventsCmd is `pt events`: print the org's events, and with --follow keep
// printing new ones, reconnecting with Last-Event-ID when the stream
// breaks.
type eventsCmd struct{ app *app }

const eventsSynopsis = "pt events [--follow] [--sandbox ID] [--type T] [--session ID] [--workflow ID] [--agent-session ID] [--vault ID] [--after N] [--json]"

// bind binds the flags; the returned run prints events oldest first: a table
// row each, or one JSON object per line with --json. --follow runs until
// interrupted (exit 0).
func (c *eventsCmd) bind(fs *flag.FlagSet) runFunc {
	follow := fs.Bool("follow", false, "keep printing new events until interrupted")
	fs.BoolVar(follow, "f", false, "short for --follow")
	var f platinum.EventFilter
	fs.StringVar(&f.SandboxID, "sandbox", "", "only this sandbox's events")
	var types listFlag
	fs.Var(&types, "type", "only events of this type (repeatable), e.g. state_changed")
	fs.StringVar(&f.SessionID, "session", "", "only events of this session")
	fs.StringVar(&f.WorkflowID, "workflow", "", "only events of this workflow context")
	fs.StringVar(&f.AgentSessionID, "agent-session", "", "only events of this agent-session context")
	fs.StringVar(&f.VaultID, "vault", "", "only events of this vault")
	after := fs.Int64("after", 0, "only events after this event ID")
	asJSON := fs.Bool("json", false, "print one JSON event per line")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) > 0 {
			return in.usageErr("unexpected argument %q", pos[0])
		}
		f.Types = types
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		print := func(e platinum.Event) error { return printEvent(c.app.stdout, e, *asJSON) }
		if *follow {
			err := cl.Events.Follow(ctx, f, *after, print)
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return nil
			}
			return err
		}
		cursor := *after
		for {
			evs, next, err := cl.Events.List(ctx, f, cursor, 1000)
			if err != nil {
				return err
			}
			for _, e := range evs {
				if err := print(e); err != nil {
					return err
				}
			}
			if next == cursor || len(evs) == 0 {
				return nil
			}
			cursor = next
		}
	}
}

// printEvent writes one event: compact JSON, or "ID TIME TYPE SANDBOX
// DETAIL" where DETAIL is "from → to (reason)" for a state change and the
// data otherwise.
func printEvent(w io.Writer, e platinum.Event, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	detail := string(e.Data)
	if from, to, reason, ok := e.StateChange(); ok {
		detail = string(from) + " → " + string(to)
		if reason != "" {
			detail += " (" + reason + ")"
		}
	}
	_, err := fmt.Fprintf(w, "%s  %s  %s  %s  %s\n", strconv.FormatInt(e.ID, 10), formatTime(e.CreatedAt), e.Type, orDash(e.SandboxID), detail)
	return err
}
