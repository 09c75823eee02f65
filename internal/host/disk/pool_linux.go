package disk

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Open returns the pool for data dir dir, creating it on first use:
//
//   - dir/pool already mounted (ptd restarted): reuse it;
//   - dir/pool.img exists but is not mounted (host rebooted): mount it;
//   - dir itself supports reflink (host XFS or btrfs): use dir directly;
//   - otherwise make dir/pool.img (sparse, opts.PoolSizeBytes), format it
//     XFS with reflink once, and loop-mount it at dir/pool.
//
// The mount outlives the process on purpose; Close undoes it (tests,
// uninstall).
func Open(ctx context.Context, dir string, opts Options, logger *slog.Logger) (*Pool, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	size := opts.PoolSizeBytes
	if size == 0 {
		size = DefaultPoolSize
	}
	if size < minPoolSize {
		return nil, fmt.Errorf("pool size %d: want at least %d bytes (XFS minimum): %w", size, minPoolSize, sandbox.ErrInvalidArgument)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	dir, err := cleanPath(dir)
	if err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	p := &Pool{dir: dir, log: logger}
	mnt := filepath.Join(dir, "pool")
	img := filepath.Join(dir, "pool.img")

	m, mounted, err := findMount(mnt)
	if err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	_, imgErr := os.Stat(img)
	switch {
	case mounted:
		if m.fstype != "xfs" {
			return nil, fmt.Errorf("pool: %s is mounted as %s, want xfs: %w", mnt, m.fstype, sandbox.ErrConflict)
		}
		p.path, p.loopMounted = mnt, true
		logger.Debug("pool: reusing mount", "path", mnt, "source", m.source)
	case imgErr == nil:
		if err := mountPoolImage(img, mnt); err != nil {
			return nil, err
		}
		p.path, p.loopMounted = mnt, true
		logger.Info("pool: mounted existing image", "image", img, "path", mnt)
	case !errors.Is(imgErr, os.ErrNotExist):
		return nil, fmt.Errorf("pool: %w", imgErr)
	default:
		ok, err := reflinkSupported(dir)
		if err != nil {
			return nil, fmt.Errorf("pool: %w", err)
		}
		if ok {
			p.path = dir
			logger.Info("pool: data dir supports reflink, using it directly", "path", dir)
			break
		}
		if err := createPoolImage(ctx, img, size); err != nil {
			return nil, err
		}
		if err := mountPoolImage(img, mnt); err != nil {
			return nil, err
		}
		p.path, p.loopMounted = mnt, true
		logger.Info("pool: created sparse XFS image", "image", img, "size", size, "path", mnt)
	}
	for _, d := range []string{"images", "blank", "tmp"} {
		if err := os.MkdirAll(filepath.Join(p.path, d), 0o755); err != nil {
			return nil, fmt.Errorf("pool: %w", err)
		}
	}
	p.sweepTmp()
	return p, nil
}

// sweepTmp removes what a crashed process left in Path()/tmp: half-made
// clones and blanks (plain files) and grow mountpoints (empty dirs; a dir
// still mounted on is busy and stays). Only old entries go, so a second
// Open of a pool in use (tests) never races a live operation.
func (p *Pool) sweepTmp() {
	dir := filepath.Join(p.path, "tmp")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < time.Hour {
			continue
		}
		// os.Remove, not RemoveAll: never descend into a mount.
		if err := os.Remove(filepath.Join(dir, e.Name())); err == nil {
			p.log.Info("pool: removed stale temporary", "name", e.Name())
		}
	}
}

// Close unmounts the pool (which frees its loop device) if Open mounted
// it, after dropping its spare disks. ptd does not call it: the pool stays
// mounted across restarts. It fails while images in the pool are still
// mounted.
func (p *Pool) Close(ctx context.Context) error {
	if err := p.DropSpares(ctx); err != nil {
		return err
	}
	if !p.loopMounted {
		return nil
	}
	m, mounted, err := findMount(p.path)
	if err != nil || !mounted {
		return err
	}
	loop := autoclearLoop(m.source)
	// An image unmounted lazily, or just before, may still hold its file
	// for a moment (autoclear runs from a kernel work queue): retry busy.
	for delay, waited := time.Millisecond, time.Duration(0); ; delay = min(2*delay, 100*time.Millisecond) {
		err := unix.Unmount(p.path, 0)
		if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			break
		}
		if !errors.Is(err, unix.EBUSY) || waited > 3*time.Second {
			return fmt.Errorf("pool: unmount %s: %w", p.path, err)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("pool: unmount %s: %w", p.path, err)
		}
		time.Sleep(delay)
		waited += delay
	}
	if loop.dev != "" {
		loop.waitReleased()
	}
	return nil
}

// createPoolImage makes a sparse file and formats it, under a temporary
// name so that a crash never leaves a half-formatted pool.img behind.
func createPoolImage(ctx context.Context, img string, size int64) error {
	tmp := img + ".tmp"
	if err := makeXFSImage(ctx, tmp, size); err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	if err := os.Rename(tmp, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("pool: %w", err)
	}
	return nil
}

// makeXFSImage creates (or replaces) a sparse file of size bytes at path
// and formats it XFS with reflink.
func makeXFSImage(ctx context.Context, path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// -K: skip discards (pointless on a fresh sparse file);
		// -f: the file may hold an older attempt.
		err = run(ctx, "mkfs.xfs", "-q", "-f", "-K", "-m", "reflink=1", path)
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("format %s: %w", path, err)
	}
	return nil
}

func mountPoolImage(img, mnt string) error {
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	if err := mountLoop(img, mnt, ""); err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	return nil
}

// mountLoop attaches img to an autoclear loop device and mounts it as XFS.
func mountLoop(img, target, data string) error {
	dev, hold, err := attachLoop(img)
	if err != nil {
		return err
	}
	// Closing hold frees the device unless the mount below holds it.
	defer hold.Close()
	if err := unix.Mount(dev, target, "xfs", 0, data); err != nil {
		return fmt.Errorf("mount %s (%s) at %s: %w", img, dev, target, err)
	}
	return nil
}

// reflinkSupported tries FICLONE on two small files in dir.
func reflinkSupported(dir string) (bool, error) {
	b := make([]byte, 8)
	rand.Read(b)
	base := filepath.Join(dir, ".reflink-probe-"+hex.EncodeToString(b))
	src, err := os.OpenFile(base+".src", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, fmt.Errorf("reflink probe: %w", err)
	}
	defer os.Remove(src.Name())
	defer src.Close()
	if _, err := src.Write(bytes.Repeat([]byte{'x'}, 4096)); err != nil {
		return false, fmt.Errorf("reflink probe: %w", err)
	}
	dst, err := os.OpenFile(base+".dst", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, fmt.Errorf("reflink probe: %w", err)
	}
	defer os.Remove(dst.Name())
	defer dst.Close()
	return unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())) == nil, nil
}

// run runs a helper program, returning its output in the error.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
