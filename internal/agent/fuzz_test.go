package agent

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzResolvePath: every path a files call names (REST, SDK, envd) comes
// here. A path is refused, or becomes a clean absolute path that never
// climbs out through "..".
func FuzzResolvePath(f *testing.F) {
	const home = "/home/user"
	f.Fuzz(func(t *testing.T, p string) {
		got, err := resolvePath(p, home)
		if err != nil {
			if !errors.Is(err, errInvalidPath) {
				t.Fatalf("%q: %v, want errInvalidPath", p, err)
			}
			return
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got {
			t.Fatalf("%q resolved to %q: want a clean absolute path", p, got)
		}
		for _, el := range strings.Split(got, "/") {
			if el == ".." {
				t.Fatalf("%q resolved to %q, which climbs", p, got)
			}
		}
		if !filepath.IsAbs(p) && !strings.HasPrefix(got, home) {
			t.Fatalf("relative %q resolved to %q, outside home", p, got)
		}
	})
}
