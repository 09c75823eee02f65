package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// writeJSON prints v as indented JSON: --json output is for scripts, so it
// is the API's own shape, one document, ending in a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns; call flush when done.
func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 3, ' ', 0) }

func orDash(s string) string { return cmp.Or(s, "-") }

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func formatCPU(c float64) string { return strconv.FormatFloat(c, 'g', -1, 64) }

// formatBytes renders a size in binary units, e.g. "206.0 MiB".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// sandboxHeader and sandboxRow are the columns of `pt sandbox list`.
const sandboxHeader = "ID\tNAME\tSTATE\tTEMPLATE\tCPU\tRAM\tDISK\tCREATED"

func sandboxRow(s *platinum.Sandbox) string {
	return strings.Join([]string{
		s.ID, orDash(s.Name), string(s.State), s.Template, formatCPU(s.CPU),
		fmt.Sprintf("%dMB", s.RAMMB), fmt.Sprintf("%dGB", s.DiskGB), formatTime(s.CreatedAt),
	}, "\t")
}

// printSandbox shows one sandbox, as JSON or as a field list.
func printSandbox(w io.Writer, s *platinum.Sandbox, asJSON bool) error {
	if asJSON {
		return writeJSON(w, s)
	}
	tw := table(w)
	field := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	field("ID", s.ID)
	field("Name", orDash(s.Name))
	field("State", string(s.State))
	if s.Reason != "" {
		field("Reason", s.Reason)
	}
	tpl := s.Template
	if s.TemplateVersionID != "" {
		tpl += " (" + s.TemplateVersionID + ")"
	}
	field("Template", tpl)
	field("CPU", formatCPU(s.CPU))
	field("RAM", fmt.Sprintf("%d MB", s.RAMMB))
	field("Disk", fmt.Sprintf("%d GB", s.DiskGB))
	field("Env keys", orDash(strings.Join(s.EnvKeys, ", ")))
	var md []string
	for _, k := range slices.Sorted(maps.Keys(s.Metadata)) {
		md = append(md, k+"="+s.Metadata[k])
	}
	field("Metadata", orDash(strings.Join(md, ", ")))
	field("Host", orDash(s.HostID))
	field("Created", formatTime(s.CreatedAt))
	field("Updated", formatTime(s.UpdatedAt))
	if s.DeletedAt != nil {
		field("Deleted", formatTime(*s.DeletedAt))
	}
	return tw.Flush()
}
