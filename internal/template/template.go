// Package template builds template root filesystems: the read-only
// directories that become the overlay lower dir of every sandbox created
// from a template. Builders write into a temporary sibling of the
// destination and rename it into place, so a crash or a concurrent build
// never leaves a half-built template where the host expects a complete one.
package template

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Known template slugs.
const (
	// SlugBusybox is a tiny busybox-static rootfs (≈2 MB, built in
	// milliseconds); it keeps tests fast.
	SlugBusybox = "busybox"
	// SlugBase is Debian bookworm minbase with procps and ca-certificates,
	// the default template users get.
	SlugBase = "pt-base"
)

// Progress receives human-readable progress lines while a template builds.
// Lines have the form "NN% message"; the percentage never decreases during
// one build. A nil Progress discards them.
type Progress func(line string)

// Registry maps template slugs to their builders. The zero value is usable:
// it builds pt-base without a cache, from the host's configured Debian
// mirror.
type Registry struct {
	// CacheDir holds cached pt-base tarballs so a second build (another
	// data dir, another test) extracts in about a second instead of running
	// debootstrap again. Empty disables caching.
	CacheDir string
	// Mirror overrides the Debian mirror; empty means DefaultMirror().
	Mirror string
}

// Slugs returns the slugs Build knows, sorted.
func (r Registry) Slugs() []string {
	s := []string{SlugBusybox, SlugBase, SlugPythonNode, SlugNode, SlugCodeInterpreter}
	sort.Strings(s)
	return s
}

// Build builds the template slug into dest, which must not exist or be an
// empty directory. It returns an error wrapping sandbox.ErrNotFound for an
// unknown slug and sandbox.ErrAlreadyExists when dest is not empty.
func (r Registry) Build(ctx context.Context, slug, dest string, progress Progress) error {
	switch slug {
	case SlugBusybox:
		if err := BuildBusybox(ctx, dest); err != nil {
			return err
		}
		report(progress, 100, "busybox template built")
		return nil
	case SlugBase:
		return BuildDebian(ctx, dest, DebianOptions{CacheDir: r.CacheDir, Mirror: r.Mirror}, progress)
	case SlugPythonNode, SlugNode, SlugCodeInterpreter:
		return BuildDerived(ctx, dest, DerivedOptions{
			Base:     DebianOptions{CacheDir: r.CacheDir, Mirror: r.Mirror},
			Packages: derivedPackages[slug],
			Files:    derivedFiles[slug],
		}, progress)
	default:
		return fmt.Errorf("template %q: %w", slug, sandbox.ErrNotFound)
	}
}

func report(p Progress, pct int, msg string) {
	if p != nil {
		p(fmt.Sprintf("%d%% %s", pct, msg))
	}
}

// publish runs build on a fresh temporary directory next to dest and then
// renames it to dest. rename(2) is atomic and replaces an empty directory,
// so readers see either nothing or a complete template.
func publish(dest string, build func(dir string) error) error {
	if !filepath.IsAbs(dest) {
		return fmt.Errorf("template dest %q: not absolute: %w", dest, sandbox.ErrInvalidArgument)
	}
	dest = filepath.Clean(dest)
	if err := checkDest(dest); err != nil {
		return err
	}
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("template dest: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dest)+".build-")
	if err != nil {
		return fmt.Errorf("template dest: %w", err)
	}
	// The root of a template is the container's "/": 0755, not MkdirTemp's 0700.
	if err := os.Chmod(tmp, 0o755); err != nil {
		removeTree(tmp)
		return fmt.Errorf("template dest: %w", err)
	}
	if err := build(tmp); err != nil {
		removeTree(tmp)
		return err
	}
	if err := renameDir(tmp, dest); err != nil {
		removeTree(tmp)
		if errors.Is(err, os.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			return fmt.Errorf("template dest %q: %w", dest, sandbox.ErrAlreadyExists)
		}
		return fmt.Errorf("template publish: %w", err)
	}
	return nil
}

func checkDest(dest string) error {
	entries, err := os.ReadDir(dest)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("template dest: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("template dest %q: %w", dest, sandbox.ErrAlreadyExists)
	}
	return nil
}
