// Package envscript renders a sandbox's environment as /etc/pt-env: a
// POSIX shell file of export lines that boot services and terminal shells
// source (docs/env-and-secrets.md). pt-agent writes it when POST
// /init asks; ptd renders the same bytes when an older agent does not.
package envscript

import (
	"sort"
	"strings"
)

// Path is where the file lives in every sandbox.
const Path = "/etc/pt-env"

// Header, set to "written" on /init's answer, says the agent wrote the
// file; ptd uploads it itself when the header is missing (an agent older
// than the field, still running in a pooled sandbox).
const Header = "X-Pt-Env-Script"

// Render returns env as export lines, sorted by name, each value single-
// quoted so the shell reads it back byte for byte.
func Render(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# Written by Platinum at every cold boot (and warm create) from the sandbox's environment.\n")
	for _, k := range keys {
		b.WriteString("export " + k + "='" + strings.ReplaceAll(env[k], "'", `'\''`) + "'\n")
	}
	return b.String()
}
