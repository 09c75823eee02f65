package platinum_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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

// TestDependencyDirection enforces the one-way data flow that
// docs/ARCHITECTURE.md draws: each layer lists what it must not reach,
// directly or through any package of the module it imports (the closure
// is checked, so a forbidden dependency cannot sneak in one hop away);
// standard library bans (net/http, database/sql) apply to direct imports.
func TestDependencyDirection(t *testing.T) {
	const mod = "github.com/platinum-dev/platinum/"
	bad := map[string][]string{
		"internal/sandbox":      {mod, "net/http", "database/sql"},
		"internal/hostapi":      {mod + "internal/controlplane", mod + "internal/host", mod + "internal/store", mod + "internal/httpapi", "net/http"},
		"internal/controlplane": {"net/http", mod + "internal/httpapi", mod + "internal/host", mod + "internal/store/sqlite", mod + "internal/store/postgres"},
		// The sessions part sits beside the core, over the same layers.
		"internal/sessions": {"net/http", mod + "internal/httpapi", mod + "internal/host", mod + "internal/store/sqlite", mod + "internal/store/postgres"},
		// A host runs sandboxes and nothing else: no control plane, store,
		// transports or webhooks, so a host-only process stays small.
		"internal/host":    {mod + "internal/controlplane", mod + "internal/store", mod + "internal/httpapi", mod + "internal/webhook", mod + "internal/compat"},
		"internal/agent":   {mod + "internal/store", mod + "internal/controlplane", mod + "internal/host", mod + "internal/objstore"},
		"cmd/pt-agent":     {mod + "internal/store", mod + "internal/controlplane", mod + "internal/host", mod + "internal/objstore"},
		"internal/runtime": {mod + "internal/store", mod + "internal/controlplane", mod + "internal/httpapi", mod + "internal/host"},
		"internal/store":   {mod + "internal/controlplane", mod + "internal/host", "net/http"},
		// Forwarding reads the shared store only: it knows no surface's
		// routes and no part of the control plane.
		"internal/forward": {mod + "internal/controlplane", mod + "internal/httpapi", mod + "internal/compat", mod + "internal/host", mod + "internal/sessions"},
		// Regions, in front of forwarding, read whether the local store has
		// a sandbox and speak HTTP to other regions: no part of the
		// control plane or its surfaces.
		"internal/region": {mod + "internal/controlplane", mod + "internal/httpapi", mod + "internal/compat", mod + "internal/host", mod + "internal/sessions"},
		"cmd/pt":          {mod + "internal/"},
		// The MCP server reaches ptd only through the public SDK (/v1).
		"mcpserver": {mod + "internal/"},
	}
	// allowed lifts a ban of its layer from one package under it.
	allowed := map[string][]string{
		// The remote store is the store contract carried over HTTP to
		// ptd hosts (`--join`): HTTP is what it is for. It still reaches
		// neither the control plane nor a host.
		"internal/store/remote": {"net/http"},
	}
	pkgs := goPackages(t)
	// matches: f names a package and its subpackages, or with a trailing
	// slash everything under it.
	matches := func(im, f string) bool {
		if strings.HasSuffix(f, "/") {
			return strings.HasPrefix(im, f)
		}
		return im == f || strings.HasPrefix(im, f+"/")
	}
	// closure returns every import reached from dir: the module's own
	// packages followed through, the rest as leaves.
	closure := func(dir string) map[string]bool {
		seen := map[string]bool{}
		var walk func(string)
		walk = func(d string) {
			for _, im := range pkgs[d].imports {
				if seen[im] {
					continue
				}
				seen[im] = true
				if rest, ok := strings.CutPrefix(im, mod); ok {
					walk(filepath.FromSlash(rest))
				}
			}
		}
		walk(dir)
		return seen
	}
	for dir := range pkgs {
		for prefix, forbidden := range bad {
			if dir != prefix && !strings.HasPrefix(dir, prefix+"/") {
				continue
			}
			reached := closure(dir)
			for _, f := range forbidden {
				if slices.Contains(allowed[dir], f) {
					continue
				}
				for im := range reached {
					if !matches(im, f) || im == mod+"internal/sandbox" || strings.HasPrefix(im, mod+dir) {
						continue
					}
					if !strings.HasPrefix(f, mod) && !slices.Contains(pkgs[dir].imports, im) {
						continue // standard library bans are on direct imports only
					}
					t.Errorf("%s reaches %s, which its layer must not", dir, im)
				}
			}
		}
	}
	// The SDK is its own module and never imports internal code, except
	// in tests and platinumtest, which is ptd itself served for tests.
	filepath.WalkDir("sdk/go", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path == filepath.Join("sdk", "go", "platinumtest") {
			return filepath.SkipDir
		}
		if err == nil && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, _ := os.ReadFile(path)
			if strings.Contains(string(b), `"`+mod+"internal") {
				t.Errorf("%s imports the main module's internal packages", path)
			}
		}
		return nil
	})
}
