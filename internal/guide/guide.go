// Package guide reads the user guide's tested examples out of docs/*.md,
// so tests run the guide's own text and a changed example cannot drift
// from what the product does. A tested example is a fenced block whose
// info string is "sh tested:NAME"; it is named "PAGE.md#NAME".
package guide

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Marker starts the info string of a tested example, after the language.
const Marker = "tested:"

// Examples returns every tested example of the guide pages in dir, by
// name ("sandboxes.md#create"). Two examples of one page with the same
// name are an error.
func Examples(dir string) (map[string]string, error) {
	pages, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		for name, block := range parse(string(b)) {
			key := filepath.Base(p) + "#" + name
			if _, dup := out[key]; dup || block == "" {
				return nil, fmt.Errorf("%s: example %q is empty or named twice", p, name)
			}
			out[key] = block
		}
	}
	return out, nil
}

// Names returns the names of examples in order.
func Names(ex map[string]string) []string {
	names := make([]string, 0, len(ex))
	for k := range ex {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// parse returns a page's tested blocks by name; a block named twice is
// returned empty so Examples reports it.
func parse(page string) map[string]string {
	out := map[string]string{}
	var name string
	var body []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(page))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		switch {
		case !in && fence:
			in, name, body = true, "", nil
			info := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "```"))
			if len(info) == 2 && info[0] == "sh" && strings.HasPrefix(info[1], Marker) {
				name = strings.TrimPrefix(info[1], Marker)
			}
		case in && fence:
			in = false
			if name != "" {
				if _, dup := out[name]; dup {
					out[name] = ""
				} else {
					out[name] = strings.Join(body, "\n") + "\n"
				}
			}
		case in:
			body = append(body, line)
		}
	}
	return out
}

// Commands splits an example into the commands it runs, in order: one per
// line, a line ending in a backslash joined with the next, blank lines and
// comment lines (which show output or explain) left out.
func Commands(block string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(block, "\n") {
		if cur.Len() == 0 && (strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#")) {
			continue
		}
		if rest, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(rest + "\\\n")
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out
}
