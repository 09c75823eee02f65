package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// newFlags returns a flag set that reports errors to the caller instead of
// printing them or exiting, so every verb fails the same way.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// usageText renders a verb's synopsis followed by its flags.
func usageText(fs *flag.FlagSet, synopsis string) string {
	var b strings.Builder
	b.WriteString("usage: " + synopsis + "\n")
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		b.WriteString("\nflags:\n")
		fs.VisitAll(func(f *flag.Flag) { writeFlag(&b, f) })
	}
	return b.String()
}

// writeFlag prints one flag the way users type it: -x for one letter,
// --name otherwise.
func writeFlag(b *strings.Builder, f *flag.Flag) {
	dash := "--"
	if len(f.Name) == 1 {
		dash = "-"
	}
	name, usage := flag.UnquoteUsage(f)
	b.WriteString("  " + dash + f.Name)
	if name != "" {
		b.WriteString(" " + name)
	}
	b.WriteString("\n      " + usage)
	if d := f.DefValue; d != "" && d != "false" && d != "0" && d != "[]" {
		b.WriteString(" (default " + d + ")")
	}
	b.WriteString("\n")
}

// parseArgs parses flags anywhere among the positional arguments (so
// `pt sandbox get ID --json` works), and treats everything after a "--"
// as positional. It returns the positional arguments; -h or --help is a
// help error carrying help, a bad flag a usage error carrying usage.
func parseArgs(fs *flag.FlagSet, usage, help string, args []string) ([]string, error) {
	var tail []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, tail = args[:i], args[i+1:]
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp(help)
			}
			return nil, usageErr(usage, "%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	return append(pos, tail...), nil
}

// kvFlag collects repeated KEY=VALUE flags into a map.
type kvFlag map[string]string

// String renders the pairs sorted, for flag defaults.
func (f kvFlag) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(f)) {
		parts = append(parts, k+"="+f[k])
	}
	return strings.Join(parts, ",")
}

// Set adds one KEY=VALUE; the value may itself contain "=".
func (f kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	f[k] = v
	return nil
}

// orNil returns nil for an empty map, so empty flags send nothing.
func (f kvFlag) orNil() map[string]string {
	if len(f) == 0 {
		return nil
	}
	return f
}

// listFlag collects a repeatable flag's values in order.
type listFlag []string

// String joins the values, for flag defaults.
func (f *listFlag) String() string { return strings.Join(*f, ",") }

// Set adds one value.
func (f *listFlag) Set(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	*f = append(*f, s)
	return nil
}

// onOffFlag is a flag that takes on/off (or true/false) and remembers
// whether it was given.
type onOffFlag struct{ v **bool }

// String renders the value, for flag defaults.
func (f onOffFlag) String() string {
	if f.v == nil || *f.v == nil {
		return ""
	}
	if **f.v {
		return "on"
	}
	return "off"
}

// Set parses on/off, true/false, yes/no or 1/0.
func (f onOffFlag) Set(s string) error {
	var b bool
	switch strings.ToLower(s) {
	case "on", "true", "yes", "1":
		b = true
	case "off", "false", "no", "0":
	default:
		return fmt.Errorf("want on or off, got %q", s)
	}
	*f.v = &b
	return nil
}
