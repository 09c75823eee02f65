package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/sdk/go/platinumtest"

	"github.com/google/go-cmp/cmp"
	"github.com/platinum-dev/platinum/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite docs/cli.md from the command table")

// exampleArgs returns the arguments pt gets in an example line: the words
// after "pt", up to a redirection or the end of a process substitution;
// single quotes group words.
func exampleArgs(t *testing.T, line string) []string {
	t.Helper()
	if i := strings.LastIndex(line, "| pt "); i >= 0 {
		line = line[i+2:]
	}
	line = strings.TrimPrefix(line, "source <(")
	line, _, _ = strings.Cut(line, " > ")
	line = strings.TrimSuffix(line, ")")
	var words []string
	var cur strings.Builder
	quoted, any := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, any = !quoted, true
		case r == ' ' && !quoted:
			if any {
				words = append(words, cur.String())
			}
			cur.Reset()
			any = false
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	if any {
		words = append(words, cur.String())
	}
	if len(words) == 0 || words[0] != "pt" {
		t.Fatalf("example %q does not run pt", line)
	}
	return words[1:]
}

// TestEveryCommandInHelp walks the command table: every command and alias
// is listed by pt help (or reached through an alias), has a usage line
// that starts with its own path, help with at least one example, and each
// example names that command and parses with its flags.
func TestEveryCommandInHelp(t *testing.T) {
	top := topUsage()
	srv := platinumtest.NewServer(t)
	for i := range commands {
		c := &commands[i]
		t.Run(c.path, func(t *testing.T) {
			if !strings.Contains(top, "\n  "+strings.TrimSpace(c.path+" "+c.args)+"  ") {
				t.Errorf("pt help does not list %q", c.path)
			}
			if c.short == "" || len(c.examples) == 0 {
				t.Errorf("%s: no short line or no example", c.path)
			}
			r := ptd(t, srv, append(strings.Fields(c.path), "--help")...)
			if r.code != 0 || !strings.HasPrefix(r.stdout, "usage: pt "+c.path) || !strings.Contains(r.stdout, "\nexamples:\n  ") {
				t.Errorf("pt %s --help: exit %d\n%s%s", c.path, r.code, r.stdout, r.stderr)
			}
			if h := ptd(t, srv, append([]string{"help"}, strings.Fields(c.path)...)...); h.code != 0 || h.stdout != r.stdout {
				t.Errorf("pt help %s differs from pt %s --help: %q", c.path, c.path, h.stdout)
			}
			head, _ := splitPath(c.path)
			for _, a := range c.aliases {
				if got := lookup(head + a); got != c {
					t.Errorf("alias %q does not reach %s", head+a, c.path)
				}
			}
			for _, ex := range c.examples {
				args := exampleArgs(t, ex)
				got, rest, err := find(args)
				if err != nil || got != c {
					t.Errorf("example %q reaches %v (%v), not %s", ex, got, err, c.path)
					continue
				}
				if _, _, err := got.parse(&app{}, rest); err != nil {
					t.Errorf("example %q does not parse: %v", ex, err)
				}
			}
		})
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("help reached the server: %q", srv.Requests())
	}
}

// TestCompletion: each shell's script names every command word and every
// flag of a command, and bash and zsh accept its syntax.
func TestCompletion(t *testing.T) {
	srv := platinumtest.NewServer(t)
	for _, shell := range []string{"bash", "zsh", "fish"} {
		r := ptd(t, srv, "completion", shell)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("pt completion %s: exit %d %s", shell, r.code, r.stderr)
		}
		for _, c := range commands {
			for _, w := range strings.Fields(c.path) {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("%s completion lacks %q", shell, w)
				}
			}
		}
		for _, f := range []string{"template", "allow-out", "no-auto-resume", "follow"} {
			if !strings.Contains(r.stdout, f) {
				t.Errorf("%s completion lacks the flag %s", shell, f)
			}
		}
		t.Run(shell+" -n", func(t *testing.T) {
			testenv.RequiresCommand(t, shell)
			cmd := exec.Command(shell, "-n")
			cmd.Stdin = strings.NewReader(r.stdout)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s -n rejects the script: %v\n%s", shell, err, out)
			}
		})
	}
	if r := ptd(t, srv, "completion", "tcsh"); r.code != 2 || !strings.Contains(r.stderr, `unknown shell "tcsh"`) {
		t.Errorf("pt completion tcsh: exit %d %s", r.code, r.stderr)
	}
}

// TestBashCompletionCompletes runs bash's completion function the way a
// keypress does and checks what it offers.
func TestBashCompletionCompletes(t *testing.T) {
	testenv.RequiresCommand(t, "bash")
	script := bashCompletion()
	for _, tc := range []struct {
		line []string
		want string
	}{
		{[]string{"pt", "sa"}, "sandbox"},
		{[]string{"pt", "sandbox", "cr"}, "create"},
		{[]string{"pt", "sandbox", "create", "--no-a"}, "--no-auto-resume"},
		{[]string{"pt", "sbx", "ls", "--ro"}, ""}, // an alias group is not completed
		{[]string{"pt", "sandbox", "ls", "--ro"}, "--roots"},
	} {
		words := strings.Join(tc.line, " ")
		prog := script + "\nCOMP_WORDS=(" + words + "); COMP_CWORD=" + strconv.Itoa(len(tc.line)-1) + "; _pt; echo \"${COMPREPLY[*]}\"\n"
		out, err := exec.Command("bash", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", words, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("completing %q offers %q, want %q", words, got, tc.want)
		}
	}
}

// TestCLIReference keeps docs/cli.md equal to what the table renders.
func TestCLIReference(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "cli.md")
	want := cliReference()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("docs/cli.md is stale; run go test ./cmd/pt -run TestCLIReference -update (-want +got):\n%s", diff)
	}
}
