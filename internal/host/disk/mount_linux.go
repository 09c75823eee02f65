package disk

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	target, fstype, source string
}

// findMount returns the topmost mount at target, if target is a mount point.
func findMount(target string) (mountEntry, bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return mountEntry{}, false, fmt.Errorf("mountinfo: %w", err)
	}
	defer f.Close()
	var found mountEntry
	ok := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent maj:min root target options [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+2 >= len(fields) {
			continue
		}
		if unescapeMountinfo(fields[4]) == target {
			found = mountEntry{target: target, fstype: fields[sep+1], source: unescapeMountinfo(fields[sep+2])}
			ok = true // keep scanning: later lines are mounted on top
		}
	}
	if err := sc.Err(); err != nil {
		return mountEntry{}, false, fmt.Errorf("mountinfo: %w", err)
	}
	return found, ok, nil
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for space...).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cleanPath makes p absolute and resolves symlinks where the path exists,
// so it compares equal to what mountinfo shows.
func cleanPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r, nil
	}
	return abs, nil
}

// Unmount unmounts target, and every mount stacked on it. It is
// idempotent: a target that is not mounted (or does not exist) is fine. A
// busy mount falls back to a lazy unmount, which detaches it now and
// frees it (and its autoclear loop device) when the last user leaves.
func Unmount(ctx context.Context, target string) error {
	_, err := unmount(target)
	return err
}

// unmount reports whether it had to fall back to a lazy unmount.
func unmount(target string) (lazy bool, err error) {
	target, err = cleanPath(target)
	if err != nil {
		return false, fmt.Errorf("unmount %s: %w", target, err)
	}
	for range 64 { // bounded: stacked mounts are unmounted one by one
		m, mounted, err := findMount(target)
		if err != nil {
			return lazy, fmt.Errorf("unmount %s: %w", target, err)
		}
		if !mounted {
			return lazy, nil
		}
		loop := autoclearLoop(m.source)
		err = unix.Unmount(target, 0)
		switch {
		case err == nil:
			if loop.dev != "" {
				loop.waitReleased()
			}
			continue
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return lazy, nil // not (or no longer) a mount point
		case errors.Is(err, unix.EBUSY):
			if err := unix.Unmount(target, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				return lazy, fmt.Errorf("unmount %s: lazy: %w", target, err)
			}
			lazy = true
		default:
			return lazy, fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	return lazy, fmt.Errorf("unmount %s: still mounted after 64 unmounts", target)
}

// MountOverlay mounts an overlay at target: lower is read-only and may be
// several directories joined with ':' (topmost first); upper receives all
// writes; work must be an empty directory on the same filesystem as upper.
// upper, work and target are created if missing. The sandbox root is such
// an overlay, with lower = the template's rootfs, shared by every sandbox.
func MountOverlay(ctx context.Context, lower, upper, work, target string) error {
	if lower == "" || upper == "" || work == "" || target == "" {
		return fmt.Errorf("overlay: lower, upper, work and target are all required: %w", sandbox.ErrInvalidArgument)
	}
	for _, p := range []string{lower, upper, work} {
		if strings.ContainsAny(p, ",") {
			return fmt.Errorf("overlay: path %q contains ',': %w", p, sandbox.ErrInvalidArgument)
		}
	}
	for _, d := range []string{upper, work, target} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("overlay: %w", err)
		}
	}
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", target, "overlay", 0, opts); err != nil {
		return fmt.Errorf("overlay %s: mount: %w", target, err)
	}
	return nil
}

// FIFREEZE and FITHAW are _IOWR('X', 119/120, int); x/sys/unix lacks them.
const (
	fiFreeze = 0xC0045877
	fiThaw   = 0xC0045878
)

// Freeze flushes and suspends writes to the filesystem mounted at
// mountpoint, so that a reflink copy of its image is consistent. Writers
// block until Thaw: always pair it with a deferred Thaw. It returns an
// error wrapping sandbox.ErrConflict if the filesystem is already frozen.
func Freeze(ctx context.Context, mountpoint string) error {
	return freezeIoctl(mountpoint, fiFreeze)
}

// Thaw resumes a filesystem frozen by Freeze. Thawing a filesystem that is
// not frozen is not an error, so Thaw is safe in defers.
func Thaw(ctx context.Context, mountpoint string) error {
	return freezeIoctl(mountpoint, fiThaw)
}

func freezeIoctl(mountpoint string, req uint) error {
	op := "freeze"
	if req == fiThaw {
		op = "thaw"
	}
	f, err := os.Open(mountpoint)
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, mountpoint, err)
	}
	defer f.Close()
	_, err = unix.IoctlRetInt(int(f.Fd()), req)
	switch {
	case err == nil:
		return nil
	case req == fiThaw && errors.Is(err, unix.EINVAL):
		return nil // not frozen
	case req == fiFreeze && errors.Is(err, unix.EBUSY):
		return fmt.Errorf("%s %s: already frozen: %w", op, mountpoint, sandbox.ErrConflict)
	default:
		return fmt.Errorf("%s %s: %w", op, mountpoint, err)
	}
}
