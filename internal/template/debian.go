package template

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// DebianOptions configure BuildDebian. The zero value builds bookworm from
// the host's mirror without a cache.
type DebianOptions struct {
	// Suite is the Debian suite; default "bookworm".
	Suite string
	// Mirror is the archive URL; default DefaultMirror().
	Mirror string
	// CacheDir keeps the finished rootfs as a tarball keyed by suite,
	// variant and package set, so later builds extract it (≈1 s) instead of
	// running debootstrap (≈30–45 s). Empty disables caching.
	CacheDir string
	// Include lists packages added to the minbase set (procps and
	// ca-certificates are always included).
	Include []string
}

const (
	defaultSuite   = "bookworm"
	debianVariant  = "minbase"
	fallbackMirror = "http://deb.debian.org/debian"
)

// baseIncludes are always installed: ps for users and the agent, CA
// certificates so HTTPS works out of the box.
var baseIncludes = []string{"procps", "ca-certificates"}

// Apt source files DefaultMirror reads; variables so tests can point them
// elsewhere.
var (
	debianSourcesPath = "/etc/apt/sources.list.d/debian.sources"
	sourcesListPath   = "/etc/apt/sources.list"
)

// DefaultMirror returns the host's own Debian mirror (first URIs: of
// debian.sources, else the first deb line of sources.list), falling back to
// deb.debian.org. Using the host's mirror keeps builds working on machines
// that may only reach a local or snapshot mirror.
func DefaultMirror() string {
	if b, err := os.ReadFile(debianSourcesPath); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "URIs:"); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					return f[0]
				}
			}
		}
	}
	if b, err := os.ReadFile(sourcesListPath); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "deb" {
				continue
			}
			// Skip "[arch=amd64 signed-by=…]" option blocks.
			i := 1
			if strings.HasPrefix(f[i], "[") {
				for i < len(f) && !strings.HasSuffix(f[i], "]") {
					i++
				}
				i++
			}
			if i < len(f) {
				return f[i]
			}
		}
	}
	return fallbackMirror
}

func (o DebianOptions) withDefaults() DebianOptions {
	if o.Suite == "" {
		o.Suite = defaultSuite
	}
	if o.Mirror == "" {
		o.Mirror = DefaultMirror()
	}
	return o
}

// includes returns the sorted, de-duplicated package set.
func (o DebianOptions) includes() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range append(append([]string{}, baseIncludes...), o.Include...) {
		p = strings.TrimSpace(p)
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// cacheName is the tarball's base name. The mirror is not part of the key:
// every mirror serves the same suite.
func (o DebianOptions) cacheName() string {
	h := sha256.Sum256([]byte(o.Suite + "\x00" + debianVariant + "\x00" + strings.Join(o.includes(), ",")))
	return fmt.Sprintf("debian-%s-%s-%s", o.Suite, debianVariant, hex.EncodeToString(h[:])[:16])
}

// BuildDebian builds a Debian minbase rootfs into dest (which must not
// exist or be empty) with debootstrap, adds user "user" (uid 1000,
// /home/user, bash), removes apt lists and host-specific files, and caches
// the result in opts.CacheDir. Concurrent builds of the same key, even from
// different processes, wait on one flock'd cache entry instead of running
// debootstrap twice. progress receives "NN% message" lines.
func BuildDebian(ctx context.Context, dest string, opts DebianOptions, progress Progress) error {
	opts = opts.withDefaults()
	return publish(dest, func(dir string) error {
		if opts.CacheDir == "" {
			return debootstrap(ctx, dir, opts, progress)
		}
		return buildCached(ctx, dir, opts, progress)
	})
}

func buildCached(ctx context.Context, dir string, opts DebianOptions, progress Progress) error {
	return cachedBuild(ctx, dir, opts.CacheDir, opts.cacheName(), progress, func() error {
		return debootstrap(ctx, dir, opts, progress)
	})
}

// cachedBuild fills dir from the cache entry name in cacheDir, or runs
// build into dir and stores the result as that entry. Concurrent builds of
// one entry, even from different processes, wait on its flock instead of
// building twice; an entry that does not extract is dropped so the next
// build starts clean.
func cachedBuild(ctx context.Context, dir, cacheDir, entry string, progress Progress, build func() error) error {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return fmt.Errorf("template cache: %w", err)
	}
	name := filepath.Join(cacheDir, entry)
	tarball := name + ".tar"
	report(progress, 0, "waiting for template cache lock")
	unlock, err := lockFile(ctx, name+".lock")
	if err != nil {
		return fmt.Errorf("template cache: %w", err)
	}
	defer unlock()
	if _, err := os.Stat(tarball); err == nil {
		report(progress, 10, "extracting cached rootfs")
		if err := untar(ctx, tarball, dir); err != nil {
			os.Remove(tarball)
			return fmt.Errorf("template cache %s: %w", tarball, err)
		}
		report(progress, 100, "template ready (from cache)")
		return nil
	}
	if err := build(); err != nil {
		return err
	}
	report(progress, 98, "caching rootfs")
	tmp := fmt.Sprintf("%s.tar.tmp-%d", name, os.Getpid())
	if err := tarDir(ctx, dir, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("template cache: %w", err)
	}
	if err := os.Rename(tmp, tarball); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("template cache: %w", err)
	}
	report(progress, 100, "template ready")
	return nil
}

// tarFlags keep owners as numbers (the host's names are irrelevant),
// permissions, hard links and file capabilities.
var tarFlags = []string{"--numeric-owner", "--xattrs", "--xattrs-include=*", "--acls"}

func tarDir(ctx context.Context, dir, file string) error {
	args := append([]string{"-cpf", file}, tarFlags...)
	args = append(args, "-C", dir, ".")
	if out, err := exec.CommandContext(ctx, "tar", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func untar(ctx context.Context, file, dir string) error {
	args := append([]string{"-xpf", file}, tarFlags...)
	args = append(args, "-C", dir)
	if out, err := exec.CommandContext(ctx, "tar", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// debootstrap runs debootstrap into the empty directory dir and then
// customizes the result.
func debootstrap(ctx context.Context, dir string, opts DebianOptions, progress Progress) error {
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return fmt.Errorf("debootstrap: %w (install debootstrap)", err)
	}
	report(progress, 0, fmt.Sprintf("debootstrap %s from %s", opts.Suite, opts.Mirror))
	cmd := exec.CommandContext(ctx, "debootstrap",
		"--variant="+debianVariant,
		"--include="+strings.Join(opts.includes(), ","),
		opts.Suite, dir, opts.Mirror)
	cmd.Env = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=C.UTF-8", "DEBIAN_FRONTEND=noninteractive",
	}
	// debootstrap forks dpkg and chroot: cancel the whole process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("debootstrap: %w", err)
	}
	var tail []string
	scanDone := make(chan struct{})
	go func() {
		defer close(scanDone)
		p := &debootstrapProgress{}
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			tail = append(tail, line)
			if len(tail) > 10 {
				tail = tail[1:]
			}
			if pct, msg, ok := p.parse(line); ok {
				report(progress, pct, msg)
			}
		}
		io.Copy(io.Discard, pr)
	}()
	err := cmd.Wait()
	pw.Close()
	<-scanDone
	if err != nil {
		return fmt.Errorf("debootstrap: %w: %s", err, strings.Join(tail, " | "))
	}
	report(progress, 96, "configuring template")
	return customizeDebian(ctx, dir)
}

// customizeDebian turns debootstrap's output into a template: a normal
// user, no apt lists (stale the moment they are cached; apt-get update
// fetches fresh ones), and no files copied from the build host.
func customizeDebian(ctx context.Context, root string) error {
	out, err := exec.CommandContext(ctx, "chroot", root, "/usr/sbin/useradd",
		"--create-home", "--uid", "1000", "--user-group", "--shell", "/bin/bash", "user").CombinedOutput()
	if err != nil {
		return fmt.Errorf("useradd: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if err := cleanApt(root); err != nil {
		return err
	}
	files := map[string]string{
		"etc/hostname":    "sandbox\n",
		"etc/hosts":       defaultHosts,
		"etc/resolv.conf": "",
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("template files: %w", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("template files: %w", err)
		}
	}
	return nil
}
