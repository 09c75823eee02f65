package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxResize is `pt sandbox resize ID [--cpu N] [--ram MB] [--disk GB]`.
// ptd changes disk_gb in a request of its own, so when --disk comes with
// --cpu or --ram, pt makes two calls: cpu and memory first, then disk.
type sandboxResize struct{ app *app }

const sandboxResizeSynopsis = "pt sandbox resize ID [--cpu N] [--ram MB] [--disk GB] [--json]\n\n" +
	"  A running sandbox changes cpu and memory live, within the headroom it booted with,\n" +
	"  and grows its disk in place. A stopped sandbox boots at the new size next time.\n" +
	"  The disk can only grow."

// bind binds the flags; the returned run resizes and prints what the sandbox
// has afterwards.
func (c *sandboxResize) bind(fs *flag.FlagSet) runFunc {
	var (
		cpu    float64
		ram    int
		disk   int
		asJSON bool
	)
	fs.Float64Var(&cpu, "cpu", 0, "vCPUs, `N` (e.g. 4 or 0.5)")
	fs.IntVar(&ram, "ram", 0, "memory in `MB`")
	fs.IntVar(&disk, "disk", 0, "disk in `GB` (grow only)")
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		usage := in.usage
		var live, diskReq platinum.ResizeRequest
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "cpu":
				live.CPU = &cpu
			case "ram":
				live.RAMMB = &ram
			case "disk":
				diskReq.DiskGB = &disk
			}
		})
		switch {
		case len(pos) != 1:
			return usageErr(usage, "want exactly one sandbox ID")
		case live.CPU == nil && live.RAMMB == nil && diskReq.DiskGB == nil:
			return usageErr(usage, "nothing to change: give --cpu, --ram or --disk")
		}
		id := pos[0]
		again := resizeCommand(id, live, diskReq)
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		var res *platinum.ResizeResult
		if live.CPU != nil || live.RAMMB != nil {
			if res, err = cl.Sandboxes.Resize(ctx, id, live); err != nil {
				return c.explain(err, id, again)
			}
		}
		if diskReq.DiskGB != nil {
			first := res
			if res, err = cl.Sandboxes.Resize(ctx, id, diskReq); err != nil {
				if first != nil {
					if !asJSON {
						c.print(first)
					}
					fmt.Fprintln(c.app.stderr, "cpu and memory were resized; the disk was not:")
				}
				return c.explain(err, id, again)
			}
			if first != nil {
				res.Requested.CPU, res.Requested.RAMMB = first.Requested.CPU, first.Requested.RAMMB
				res.Partial = res.Partial || first.Partial
			}
		}
		if asJSON {
			return writeJSON(c.app.stdout, res)
		}
		c.print(res)
		return nil
	}
}

// print shows a resize result: the sizes, when they apply, and what the
// guest sees.
func (c *sandboxResize) print(r *platinum.ResizeResult) {
	w := c.app.stdout
	when := "applies now"
	switch r.AppliesAt {
	case platinum.ResizeNextStart:
		when = "applies at the next start"
	case platinum.ResizePending:
		when = "pending"
	}
	fmt.Fprintf(w, "sandbox %s: cpu %s, ram %d MB, disk %d GB (%s)\n", r.ID, formatCPU(r.CPU), r.RAMMB, r.DiskGB, when)
	if r.Partial && r.Requested.RAMMB != nil {
		fmt.Fprintf(w, "partial: the sandbox could not free memory down to %d MB; it has %d MB (and is billed for that)\n", *r.Requested.RAMMB, r.RAMMB)
	}
	if l := r.Live; l != nil {
		fmt.Fprintf(w, "live: the guest sees %d cpus and %d MB; it can grow to %s cpus and %d MB without a restart\n",
			l.GuestCPUsOnline, l.GuestMemTotalMB, formatCPU(l.MaxCPU), l.MaxRAMMB)
	}
	switch r.AppliesAt {
	case platinum.ResizeNextStart:
		fmt.Fprintf(c.app.stderr, "the sandbox is %s: it boots at this size when it starts (`pt sandbox start %s --wait`); its disk survives, its memory does not\n", r.State, r.ID)
	case platinum.ResizePending:
		fmt.Fprintf(c.app.stderr, "the host has not finished; check the size with `pt sandbox get %s`\n", r.ID)
	}
}

// explain turns a refused resize into the commands that do it anyway.
// again is the command line that repeats the resize.
func (c *sandboxResize) explain(err error, id, again string) error {
	var nre *platinum.NotResizableError
	if errors.As(err, &nre) {
		var b strings.Builder
		b.WriteString("it cannot be resized live")
		if r := nre.LiveResize.Reason; r != "" {
			b.WriteString(": " + r)
		}
		b.WriteString(".\nTo resize it with a restart (in-memory state is lost), run:")
		start := true
		for _, step := range nre.Hint.Steps {
			b.WriteString("\n  " + stepCommand(step, again))
			start = start && !strings.HasSuffix(step, "/start")
		}
		if len(nre.Hint.Steps) == 0 {
			b.WriteString("\n  pt sandbox stop " + id + " --wait\n  " + again)
		}
		if start {
			b.WriteString("\n  pt sandbox start " + id + " --wait")
		}
		return withHint(err, b.String())
	}
	if platinum.IsCode(err, platinum.CodeDiskGrowUnsupported) {
		return withHint(err, "its filesystem cannot grow while it runs; stop it and resize it, and it boots with one that can:\n"+
			"  pt sandbox stop "+id+" --wait\n  "+again+"\n  pt sandbox start "+id+" --wait")
	}
	return err
}

// stepCommand renders one API step of a hint ("POST /v1/sandboxes/ID/stop")
// as the pt command that makes it, again for the resize itself; steps it
// does not know are shown as they are.
func stepCommand(step, again string) string {
	method, path, _ := strings.Cut(step, " ")
	rest, ok := strings.CutPrefix(path, "/v1/sandboxes/")
	sbx, verb, _ := strings.Cut(rest, "/")
	if method != "POST" || !ok || sbx == "" {
		return step
	}
	switch verb {
	case "stop", "start":
		return "pt sandbox " + verb + " " + sbx + " --wait"
	case "resize":
		return again
	}
	return step
}

// resizeCommand is the `pt sandbox resize` command line for the sizes of
// reqs.
func resizeCommand(id string, reqs ...platinum.ResizeRequest) string {
	parts := []string{"pt sandbox resize", id}
	for _, r := range reqs {
		if r.CPU != nil {
			parts = append(parts, "--cpu", formatCPU(*r.CPU))
		}
		if r.RAMMB != nil {
			parts = append(parts, "--ram", strconv.Itoa(*r.RAMMB))
		}
		if r.DiskGB != nil {
			parts = append(parts, "--disk", strconv.Itoa(*r.DiskGB))
		}
	}
	return strings.Join(parts, " ")
}
