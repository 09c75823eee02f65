package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

const hostListSynopsis = "pt host list [--json]"

// hostList is `pt host list`: every host with its state, capacity and
// load.
func hostList(a *app) verb {
	return listAll(a, "ID\tSTATE\tGEN\tCPU\tRAM_MB\tSANDBOXES\tHEARTBEAT",
		func(cl *platinum.Client) func(context.Context) ([]platinum.Host, error) { return cl.Hosts.List },
		func(h *platinum.Host) []string {
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
			return []string{h.ID, state, strconv.FormatInt(h.Generation, 10), cpu, ram, boxes, h.HeartbeatAt}
		})
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
	asJSON := jsonFlag(fs, "print the host as JSON")
	return callRun(c.app, exactArgs(1, "want exactly one host ID"), func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Host, error) {
		set := cl.Hosts.Undrain
		if c.drain {
			set = cl.Hosts.Drain
		}
		return set(ctx, pos[0])
	}, jsonOrLine(c.app, asJSON, func(h *platinum.Host) string {
		return fmt.Sprintf("host %s: %s (generation %d)", h.ID, h.State, h.Generation)
	}))
}
