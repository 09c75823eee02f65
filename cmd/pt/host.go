package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// hostList is `pt host list`.
type hostList struct{ app *app }

const hostListSynopsis = "pt host list [--json]"

// bind binds the flags; the returned run prints every host with its state,
// capacity and load.
func (c *hostList) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, `print {"rows": [...]} as JSON`)
	return func(ctx context.Context, in *input) error {
		if len(in.pos) > 0 {
			return in.usageErr("unexpected argument %q", in.pos[0])
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		rows, err := cl.Hosts.List(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, struct {
				Rows []platinum.Host `json:"rows"`
			}{rows})
		}
		tw := table(c.app.stdout)
		fmt.Fprintln(tw, "ID\tSTATE\tGEN\tCPU\tRAM_MB\tSANDBOXES\tHEARTBEAT")
		for _, h := range rows {
			state, cpu, ram, boxes := h.State, "-", "-", "-"
			if state == "" {
				state = "unregistered"
			}
			if h.Capacity != nil && h.Load != nil {
				cpu = fmt.Sprintf("%g/%d", h.Load.CPU, h.Capacity.CPU)
				ram = fmt.Sprintf("%d/%d", h.Load.RAMMB, h.Capacity.RAMMB)
				var parts []string
				for _, st := range slices.Sorted(maps.Keys(h.Load.Sandboxes)) {
					parts = append(parts, fmt.Sprintf("%s=%d", st, h.Load.Sandboxes[st]))
				}
				boxes = strings.Join(parts, ",")
				if boxes == "" {
					boxes = "0"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", h.ID, state, h.Generation, cpu, ram, boxes, h.HeartbeatAt)
		}
		return tw.Flush()
	}
}

// hostDrain is `pt host drain ID` and `pt host undrain ID`.
type hostDrain struct {
	app   *app
	drain bool
}

const hostDrainSynopsis = "pt host drain ID [--json]\n\nThe host keeps its sandboxes; creates it would take answer 503 capacity (host_draining)."
const hostUndrainSynopsis = "pt host undrain ID [--json]"

// bind binds the flags; the returned run drains or undrains one host
// (platform admin token).
func (c *hostDrain) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print the host as JSON")
	return func(ctx context.Context, in *input) error {
		if len(in.pos) != 1 {
			return in.usageErr("want exactly one host ID")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		set := cl.Hosts.Undrain
		if c.drain {
			set = cl.Hosts.Drain
		}
		h, err := set(ctx, in.pos[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, h)
		}
		fmt.Fprintf(c.app.stdout, "host %s: %s (generation %d)\n", h.ID, h.State, h.Generation)
		return nil
	}
}
