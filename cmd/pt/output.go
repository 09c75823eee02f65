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
	"unicode/utf8"

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

// sandboxTable renders `pt sandbox list`'s table. The TYPE column is
// shown only when the table still fits width (0: no limit, e.g. when the
// output is not a terminal, so scripts always see the same columns).
func sandboxTable(rows []platinum.Sandbox, width int) string {
	render := func(withType bool) string {
		var b strings.Builder
		tw := table(&b)
		cols := []string{"ID", "NAME", "STATE", "TEMPLATE", "CPU", "RAM", "DISK", "CREATED"}
		if withType {
			cols = slices.Insert(cols, 3, "TYPE")
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
		for i := range rows {
			s := &rows[i]
			cells := []string{
				s.ID, orDash(s.Name), string(s.State), s.Template, formatCPU(s.CPU),
				fmt.Sprintf("%dMB", s.RAMMB), fmt.Sprintf("%dGB", s.DiskGB), formatTime(s.CreatedAt),
			}
			if withType {
				cells = slices.Insert(cells, 3, orDash(string(s.Type)))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		tw.Flush()
		return b.String()
	}
	out := render(true)
	if width > 0 && maxLineWidth(out) > width {
		return render(false)
	}
	return out
}

// maxLineWidth is the widest line of s, in runes.
func maxLineWidth(s string) int {
	n := 0
	for line := range strings.Lines(s) {
		n = max(n, utf8.RuneCountInString(strings.TrimRight(line, "\n")))
	}
	return n
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
	if s.Status != "" {
		field("Status", string(s.Status))
	}
	if s.DestroyedReason != "" {
		field("Destroyed", s.DestroyedReason)
	}
	if s.Reason != "" {
		field("Reason", s.Reason)
	}
	last, _ := s.LastStart() // a malformed record is shown raw in Metadata
	switch {
	case s.Restore != nil:
		field("Restored", formatRestore(*s.Restore))
	case last != nil:
		field("Started", formatRestore(last.Restore)+" restored, "+formatTime(last.At))
	}
	tpl := s.Template
	if s.TemplateVersionID != "" {
		tpl += " (" + s.TemplateVersionID + ")"
	}
	field("Template", tpl)
	if s.ParentID != "" {
		field("Parent", s.ParentID)
	}
	field("CPU", formatCPU(s.CPU))
	field("RAM", fmt.Sprintf("%d MB", s.RAMMB))
	field("Disk", fmt.Sprintf("%d GB", s.DiskGB))
	if s.Type != "" {
		field("Type", string(s.Type))
		field("Timers", formatRetention(s))
	}
	if s.ExpiresAt != nil {
		field("Expires", formatTime(*s.ExpiresAt))
	}
	if !s.AutoResume {
		// Only the exception is shown: on is the default.
		field("Auto-resume", "off (only `pt sandbox start` brings it back)")
	}
	field("Env keys", orDash(strings.Join(s.EnvKeys, ", ")))
	var md []string
	for _, k := range slices.Sorted(maps.Keys(s.Metadata)) {
		if k == "last_start" && last != nil {
			continue // shown above
		}
		md = append(md, k+"="+s.Metadata[k])
	}
	field("Metadata", orDash(strings.Join(md, ", ")))
	field("Host", orDash(s.HostID))
	field("Created", formatTime(s.CreatedAt))
	field("Updated", formatTime(s.UpdatedAt))
	if s.DeletedAt != nil {
		deleted := formatTime(*s.DeletedAt)
		if s.DeletedReason != "" {
			deleted += " (" + s.DeletedReason + ")"
		}
		field("Deleted", deleted)
	}
	return tw.Flush()
}

// formatRestore says what a start brought back, in words.
func formatRestore(r platinum.RestoreKind) string {
	switch r {
	case platinum.RestoreMemory:
		return "memory"
	case platinum.RestoreDiskOnly:
		return "disk only"
	}
	return string(r)
}

// formatRetention renders a sandbox's lifecycle timers, e.g. "stop after
// 60 min idle, archive 7 days after stop, never delete".
func formatRetention(s *platinum.Sandbox) string {
	timer := func(n int, unit, what, never string) string {
		if n == 0 {
			return never
		}
		if unit == "day" && n != 1 {
			unit = "days"
		}
		return fmt.Sprintf(what, n, unit)
	}
	del := timer(s.AutoDeleteDays, "day", "delete %d %s after stop", "never delete")
	if s.Type == platinum.TypeEphemeral && s.AutoDeleteDays == 0 {
		del = "delete when stopped"
	}
	return strings.Join([]string{
		timer(s.AutoStopMinutes, "min", "stop after %d %s idle", "never auto-stop"),
		timer(s.AutoArchiveDays, "day", "archive %d %s after stop", "never archive"),
		del,
	}, ", ")
}
