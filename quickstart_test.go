package platinum_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// readRepoFile returns a file of the repository as text.
func readRepoFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestQuickStart keeps the README's quick start what outside checks rely
// on: two commands on a fresh Debian 12 root machine, one that installs
// what is missing, builds and starts ptd, one that runs every test, and
// .ci/run running exactly that test command.
func TestQuickStart(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	_, after, ok := strings.Cut(readme, "## Quick start")
	if !ok {
		t.Fatal("README has no Quick start section")
	}
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(after)
	if block == nil {
		t.Fatal("README's Quick start has no sh block")
	}
	var cmds []string
	for _, line := range strings.Split(strings.TrimSpace(block[1]), "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		cmds = append(cmds, strings.TrimSpace(cmd))
	}
	if strings.Join(cmds, "|") != "scripts/ptd-up.sh|scripts/test.sh" {
		t.Errorf("quick start commands %q, want [scripts/ptd-up.sh scripts/test.sh]", cmds)
	}

	ci := readRepoFile(t, ".ci/run")
	if !regexp.MustCompile(`(?m)^exec scripts/test\.sh\s*$`).MatchString(ci) {
		t.Errorf(".ci/run does not run scripts/test.sh:\n%s", ci)
	}
	for _, f := range []string{".ci/run", "scripts/ptd-up.sh", "scripts/test.sh", "scripts/setup.sh", "scripts/build.sh"} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm()&0o100 == 0 {
			t.Errorf("%s is not an executable file (%v)", f, err)
		}
	}

	up := readRepoFile(t, "scripts/ptd-up.sh")
	steps := []string{"scripts/setup.sh", "scripts/build.sh", "exec bin/ptd serve"}
	last := -1
	for _, s := range steps {
		i := strings.Index(up, s)
		if i < 0 || i < last {
			t.Errorf("ptd-up.sh does not run %v in that order:\n%s", steps, up)
			break
		}
		last = i
	}
	test := readRepoFile(t, "scripts/test.sh")
	for _, s := range []string{"scripts/setup.sh", "go test -race"} {
		if !strings.Contains(test, s) {
			t.Errorf("scripts/test.sh lacks %q", s)
		}
	}

	// setup.sh installs, only when missing, what the host layer needs.
	setup := readRepoFile(t, "scripts/setup.sh")
	for _, pkg := range []string{"runc", "xfsprogs", "iproute2", "iptables", "busybox-static", "debootstrap"} {
		if !regexp.MustCompile(`\|\|\s*need\+=\(` + regexp.QuoteMeta(pkg) + `\)`).MatchString(setup) {
			t.Errorf("scripts/setup.sh does not install %s when missing", pkg)
		}
	}
	if !strings.Contains(setup, `apt-get install`) {
		t.Error("scripts/setup.sh does not install with apt-get")
	}
	if _, err := os.Stat("docs/ARCHITECTURE.md"); err != nil {
		t.Error(err)
	}
}
