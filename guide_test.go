package platinum_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/guide"
)

// TestGuideExamplesAreRun: every example the user guide marks as tested
// ("sh tested:NAME" in docs/*.md) is run by some test, and every example a
// test names exists. Both directions are read from the source, so this
// holds in plain `go test` without a ptd.
func TestGuideExamplesAreRun(t *testing.T) {
	ex, err := guide.Examples("docs")
	if err != nil {
		t.Fatal(err)
	}
	if len(ex) < 50 {
		t.Fatalf("found %d tested examples in docs/; the guide has more", len(ex))
	}
	ref := regexp.MustCompile(`"([a-z0-9-]+\.md#[a-z0-9-]+)"`)
	used := map[string]string{}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			used[m[1]] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range guide.Names(ex) {
		if _, ok := used[name]; !ok {
			t.Errorf("docs/%s is marked tested but no test runs it (name it as %s in a test)", name, strconv.Quote(name))
		}
	}
	for name, path := range used {
		if _, ok := ex[name]; !ok && !strings.HasPrefix(path, "internal/guide") {
			t.Errorf("%s runs the guide's example %s, which docs/ does not have", path, name)
		}
	}
}
