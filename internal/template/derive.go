package template

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// The session templates' slugs (docs/sandboxes.md), both derived from pt-base.
const (
	// SlugPythonNode is the broad default: Python 3 and Node.js on Debian.
	SlugPythonNode = "python-node"
	// SlugNode is the lean JavaScript environment: Node.js on Debian.
	SlugNode = "node"
	// SlugCodeInterpreter is python-node plus an IPython kernel and the
	// scientific stack, all from Debian packages; its marker file makes
	// pt-agent run the code-interpreter server (docs/code-interpreter.md).
	SlugCodeInterpreter = "code-interpreter"
)

// CodeInterpreterMarker is the file whose presence in a template tells
// pt-agent to start the code-interpreter server at boot.
const CodeInterpreterMarker = "etc/platinum/code-interpreter"

// derivedPackages are the Debian packages each derived slug adds to
// pt-base. npm is left out on purpose: in bookworm it pulls in ~350
// node-* packages (+180 MB, +35 s per build); `apt-get install npm`
// inside a sandbox adds it when needed. python-is-python3 makes
// `python` run Python 3, as the sandboxes guide's `python --version`
// example expects. git (+35 MB) is there because a dev environment is
// expected to clone and commit (the Daytona toolbox's git routes run it).
var derivedPackages = map[string][]string{
	SlugPythonNode: {"python3", "python-is-python3", "nodejs", "git"},
	SlugNode:       {"nodejs"},
	SlugCodeInterpreter: {"python3", "python-is-python3", "nodejs", "node-typescript",
		"python3-ipykernel", "python3-jupyter-client",
		"python3-numpy", "python3-pandas", "python3-matplotlib", "python3-scipy"},
}

// derivedFiles are files each derived slug writes into its rootfs after
// the packages are installed (part of the cache key).
var derivedFiles = map[string]map[string]string{
	SlugCodeInterpreter: {
		CodeInterpreterMarker: "# pt-agent starts the code-interpreter server on port 49999 when this file exists.\n",
		// matplotlib's default backend in a kernel is the inline one;
		// Agg for scripts run outside a kernel (no display here).
		"etc/matplotlibrc": "backend: Agg\n",
	},
}

// DerivedOptions configure BuildDerived.
type DerivedOptions struct {
	// Base is the Debian rootfs the packages are installed on (pt-base).
	Base DebianOptions
	// Packages are installed with apt-get (no recommends).
	Packages []string
	// Files are written into the rootfs (path relative to its root →
	// content, mode 0644) after the packages.
	Files map[string]string
}

// cacheName keys the derived tarball by its base and package set.
func (o DerivedOptions) cacheName() string {
	pk := append([]string(nil), o.Packages...)
	sort.Strings(pk)
	key := o.Base.cacheName() + "\x00" + strings.Join(pk, ",")
	names := make([]string, 0, len(o.Files))
	for n := range o.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		key += "\x00" + n + "\x00" + o.Files[n]
	}
	h := sha256.Sum256([]byte(key))
	return fmt.Sprintf("derived-%s-%s", o.Base.Suite, hex.EncodeToString(h[:])[:16])
}

// BuildDerived builds a rootfs into dest by installing Packages from the
// Debian mirror on top of the Base rootfs. With a cache the base comes from
// pt-base's cached tarball (a second debootstrap would cost 30–45 s; the
// apt-get install on top takes seconds) and the result is cached too, so
// later builds only extract it.
func BuildDerived(ctx context.Context, dest string, opts DerivedOptions, progress Progress) error {
	opts.Base = opts.Base.withDefaults()
	return publish(dest, func(dir string) error {
		if opts.Base.CacheDir == "" {
			if err := debootstrap(ctx, dir, opts.Base, scaled(progress, 0, 60)); err != nil {
				return err
			}
			if err := aptInstall(ctx, dir, opts, progress); err != nil {
				return err
			}
			return writeFiles(dir, opts.Files)
		}
		return buildDerivedCached(ctx, dir, opts, progress)
	})
}

func buildDerivedCached(ctx context.Context, dir string, opts DerivedOptions, progress Progress) error {
	return cachedBuild(ctx, dir, opts.Base.CacheDir, opts.cacheName(), progress, func() error {
		// The base (pt-base) from its own cache entry, built once if missing.
		if err := buildCached(ctx, dir, opts.Base, scaled(progress, 0, 50)); err != nil {
			return err
		}
		if err := aptInstall(ctx, dir, opts, progress); err != nil {
			return err
		}
		return writeFiles(dir, opts.Files)
	})
}

// writeFiles writes files (relative path → content) into root.
func writeFiles(root string, files map[string]string) error {
	for name, content := range files {
		p := filepath.Join(root, filepath.Clean("/"+name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("template files: %w", err)
		}
		os.Remove(p) // a symlink must not redirect the write
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("template files: %w", err)
		}
	}
	return nil
}

// aptInstall installs opts.Packages in the rootfs root with the chroot's
// own apt-get, from opts.Base.Mirror. The build needs the host's DNS and a
// sources list for that mirror while it runs; both are put back to the
// template's own afterwards, with apt's lists and downloaded packages
// removed (stale the moment they are cached).
func aptInstall(ctx context.Context, root string, opts DerivedOptions, progress Progress) error {
	if len(opts.Packages) == 0 {
		return nil
	}
	restore, err := swapFiles(root, map[string]string{
		"etc/resolv.conf":      hostResolvConf(),
		"etc/apt/sources.list": fmt.Sprintf("deb %s %s main\n", opts.Base.Mirror, opts.Base.Suite),
	})
	if err != nil {
		return err
	}
	defer restore()
	report(progress, 55, "apt-get update")
	if err := chrootRun(ctx, root, "apt-get", "-q", "update"); err != nil {
		return err
	}
	report(progress, 65, "apt-get install "+strings.Join(opts.Packages, " "))
	args := append([]string{"-q", "-y", "install", "--no-install-recommends"}, opts.Packages...)
	if err := chrootRun(ctx, root, "apt-get", args...); err != nil {
		return err
	}
	report(progress, 90, "cleaning apt caches")
	return cleanApt(root)
}

// chrootRun runs a command in the chroot with a clean environment,
// killing its whole process group (apt forks dpkg) on cancel.
func chrootRun(ctx context.Context, root, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, "chroot", append([]string{root, name}, args...)...)
	cmd.Env = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=C.UTF-8", "DEBIAN_FRONTEND=noninteractive", "HOME=/root",
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := strings.TrimSpace(string(out))
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, tail)
	}
	return nil
}

// cleanApt removes the apt lists and package caches a build left in root
// (apt fetches fresh ones), keeping the partial/ and lock entries apt expects.
func cleanApt(root string) error {
	for _, pattern := range []string{"var/lib/apt/lists/*", "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb"} {
		matches, _ := filepath.Glob(filepath.Join(root, pattern))
		for _, m := range matches {
			if filepath.Base(m) == "partial" || filepath.Base(m) == "lock" {
				continue
			}
			if err := os.RemoveAll(m); err != nil {
				return fmt.Errorf("clean apt: %w", err)
			}
		}
	}
	return nil
}

// swapFiles writes files into root and returns a func that puts the
// previous contents (or absence) back.
func swapFiles(root string, files map[string]string) (restore func(), err error) {
	type saved struct {
		path    string
		content []byte
		existed bool
	}
	var olds []saved
	restore = func() {
		for _, o := range olds {
			os.Remove(o.path)
			if o.existed {
				os.WriteFile(o.path, o.content, 0o644)
			}
		}
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		b, rerr := os.ReadFile(p)
		olds = append(olds, saved{path: p, content: b, existed: rerr == nil})
		// Remove first: a symlink must not redirect the write to the host.
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			restore()
			return nil, fmt.Errorf("template files: %w", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			restore()
			return nil, fmt.Errorf("template files: %w", err)
		}
	}
	return restore, nil
}

// hostResolvConf is the host's resolver configuration, for apt inside the
// chroot (which shares the host's network).
func hostResolvConf() string {
	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return ""
	}
	return string(b)
}

// scaled maps a sub-build's 0–100% progress into [from, to].
func scaled(p Progress, from, to int) Progress {
	if p == nil {
		return nil
	}
	return func(line string) {
		pctStr, msg, ok := strings.Cut(line, "% ")
		var pct int
		if _, err := fmt.Sscanf(pctStr, "%d", &pct); !ok || err != nil {
			p(line)
			return
		}
		p(fmt.Sprintf("%d%% %s", from+pct*(to-from)/100, msg))
	}
}
