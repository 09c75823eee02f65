package platinum_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// goPackages maps every package directory of the module to its parsed
// non-test files' imports and whether one has a package doc comment.
func goPackages(t *testing.T) map[string]struct {
	imports []string
	doc     bool
	name    string
} {
	t.Helper()
	pkgs := map[string]struct {
		imports []string
		doc     bool
		name    string
	}{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata" || path == "sdk") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		p := pkgs[dir]
		p.name = f.Name.Name
		p.doc = p.doc || f.Doc != nil
		for _, im := range f.Imports {
			v, _ := strconv.Unquote(im.Path.Value)
			p.imports = append(p.imports, v)
		}
		pkgs[dir] = p
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A walk that finds nothing would make every guard rail pass.
	for _, must := range []string{"internal/controlplane", "internal/sandbox", "cmd/ptd"} {
		if _, ok := pkgs[must]; !ok {
			t.Fatalf("package walk did not find %s", must)
		}
	}
	return pkgs
}

// TestPackagesDocumented fails when a package has no package doc comment.
func TestPackagesDocumented(t *testing.T) {
	for dir, p := range goPackages(t) {
		if !p.doc && !strings.HasPrefix(dir, "api/gen") {
			t.Errorf("package %s (%s) has no // Package doc comment", p.name, dir)
		}
	}
}

// TestDependencyDirection enforces DESIGN.md's one-way data flow.
func TestDependencyDirection(t *testing.T) {
	const mod = "github.com/platinum-dev/platinum/"
	bad := map[string][]string{
		"internal/sandbox":      {mod, "net/http", "database/sql"},
		"internal/controlplane": {"net/http", mod + "internal/httpapi", mod + "internal/host", mod + "internal/store/sqlite"},
		"internal/agent":        {mod + "internal/store", mod + "internal/controlplane", mod + "internal/host", mod + "internal/objstore"},
		"cmd/pt-agent":          {mod + "internal/store", mod + "internal/controlplane", mod + "internal/host"},
		"internal/runtime":      {mod + "internal/store", mod + "internal/controlplane", mod + "internal/httpapi"},
		"internal/store":        {mod + "internal/controlplane", mod + "internal/host", "net/http"},
		"cmd/pt":                {mod + "internal/"},
	}
	for dir, p := range goPackages(t) {
		for prefix, forbidden := range bad {
			if dir != prefix && !strings.HasPrefix(dir, prefix+"/") {
				continue
			}
			for _, im := range p.imports {
				for _, f := range forbidden {
					if (im == f || strings.HasPrefix(im, f)) && im != mod+"internal/sandbox" {
						t.Errorf("%s imports %s, which its layer must not", dir, im)
					}
				}
			}
		}
	}
	// The SDK is its own module and never imports internal code.
	filepath.WalkDir("sdk/go", func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".go") {
			b, _ := os.ReadFile(path)
			if strings.Contains(string(b), `"`+mod+"internal") {
				t.Errorf("%s imports the main module's internal packages", path)
			}
		}
		return nil
	})
}
