// Package runnercheck reads the summaries of the outside test runners the
// compatibility suites drive (pytest, node --test) and says whether a run
// proves anything: at least one test passed and none failed, errored,
// was skipped or was left out. A runner's zero exit status alone does not
// say that: pytest exits 0 when every test skips, node --test when a file
// has no tests.
package runnercheck

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// pytestSummary is pytest's last line, e.g.
// "======== 9 passed, 1 skipped in 12.34s ========".
var pytestSummary = regexp.MustCompile(`(?m)^=+ (.+) in [0-9.]+s(?: \([0-9:]+\))? =+\s*$`)

// Pytest checks the output of a pytest run (-v or not): its summary must
// count only passed tests, at least one.
func Pytest(out string) error {
	m := pytestSummary.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		return fmt.Errorf("pytest printed no summary line")
	}
	summary := m[len(m)-1][1]
	passed := 0
	for _, part := range strings.Split(summary, ", ") {
		n, what, ok := strings.Cut(strings.TrimSpace(part), " ")
		count, err := strconv.Atoi(n)
		if !ok || err != nil {
			return fmt.Errorf("pytest summary %q: cannot read %q", summary, part)
		}
		if what != "passed" {
			if count > 0 {
				return fmt.Errorf("pytest: %d %s (%s)", count, what, summary)
			}
			continue
		}
		passed = count
	}
	if passed == 0 {
		return fmt.Errorf("pytest passed no test (%s)", summary)
	}
	return nil
}

// nodeCount is one line of node --test's summary, e.g. "ℹ pass 11".
var nodeCount = regexp.MustCompile(`(?m)^ℹ (tests|suites|pass|fail|cancelled|skipped|todo) (\d+)\s*$`)

// NodeTest checks the output of a node --test run (spec or tap reporter):
// every test passed, at least one, none failed, was cancelled, skipped or
// left as todo.
func NodeTest(out string) error {
	counts := map[string]int{}
	for _, m := range nodeCount.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[2])
		counts[m[1]] = n // the last summary wins
	}
	for _, k := range []string{"tests", "pass", "fail"} {
		if _, ok := counts[k]; !ok {
			return fmt.Errorf("node --test printed no %q count", k)
		}
	}
	for _, k := range []string{"fail", "cancelled", "skipped", "todo"} {
		if counts[k] > 0 {
			return fmt.Errorf("node --test: %d %s", counts[k], k)
		}
	}
	if counts["pass"] == 0 || counts["pass"] != counts["tests"] {
		return fmt.Errorf("node --test: %d of %d tests passed", counts["pass"], counts["tests"])
	}
	return nil
}
