package main

import (
	"strings"
)

// cliReference renders docs/cli.md from the command table: every command
// with its usage, flags, aliases and examples. TestCLIReference keeps the
// file equal to it (go test ./cmd/pt -run TestCLIReference -update).
func cliReference() string {
	var b strings.Builder
	b.WriteString("# CLI reference\n\n")
	b.WriteString("<!-- Generated from cmd/pt's command table by `go test ./cmd/pt -run TestCLIReference -update`; do not edit. -->\n\n")
	b.WriteString("`pt` is the command-line client. It talks to the ptd at `PT_API_URL` (default `http://127.0.0.1:7070`) with\n")
	b.WriteString("the token in `PT_TOKEN`. Flags may come before or after the arguments, and everything after `--` is an\n")
	b.WriteString("argument. Exit codes: 0 success, 1 an error (pt prints the server's message, a hint and the request ID),\n")
	b.WriteString("2 a usage error, 130 interrupted, and for `pt sandbox exec` and `pt session exec` the command's own code.\n")
	b.WriteString("`pt completion bash|zsh|fish` prints a completion script for your shell.\n\n")
	b.WriteString("| command | what it does |\n|---|---|\n")
	cell := strings.NewReplacer("|", "\\|") // GitHub splits cells at a bare | even in code
	for _, c := range commands {
		b.WriteString("| [`pt " + cell.Replace(strings.TrimSpace(c.path+" "+c.args)) + "`](#" + anchor(c.path) + ") | " + cell.Replace(c.short) + " |\n")
	}
	for _, c := range commands {
		fs := newFlags("pt " + c.path)
		c.verb(&app{}).bind(fs)
		b.WriteString("\n## pt " + c.path + "\n\n```text\n" + c.help(usageText(fs, c.synopsis)) + "```\n")
	}
	return b.String()
}

// anchor is the heading anchor GitHub gives "pt PATH".
func anchor(path string) string {
	return "pt-" + strings.ReplaceAll(path, " ", "-")
}
