package disk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// imageMountOpts: every image is a reflink copy of one formatted blank, so
// they all share one XFS UUID, and XFS refuses to mount a duplicate UUID
// unless told not to check.
const imageMountOpts = "nouuid"

// CreateImage makes image name: a sparse file of sizeGB GiB, formatted XFS,
// at Path()/images/<name>.img, and returns its path. It reflink-copies a
// formatted blank of that size (formatted on first use, then kept in
// Path()/blank), so it takes milliseconds and no space. It returns an
// error wrapping sandbox.ErrAlreadyExists if the image exists and
// sandbox.ErrInvalidArgument for a bad name or size.
func (p *Pool) CreateImage(ctx context.Context, name string, sizeGB int) (string, error) {
	if err := validName(name); err != nil {
		return "", err
	}
	if err := validSize(sizeGB); err != nil {
		return "", err
	}
	blank, err := p.blank(ctx, sizeGB)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", name, err)
	}
	dst := p.ImagePath(name)
	if err := p.cloneFile(blank, dst); err != nil {
		return "", fmt.Errorf("image %s: %w", name, err)
	}
	return dst, nil
}

// blank returns the formatted blank image of sizeGB, making it once.
func (p *Pool) blank(ctx context.Context, sizeGB int) (string, error) {
	path := filepath.Join(p.path, "blank", strconv.Itoa(sizeGB)+"g.img")
	mu := p.blankLock(sizeGB)
	mu.Lock()
	defer mu.Unlock()
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	tmp := p.tmpName("blank")
	if err := makeXFSImage(ctx, tmp, int64(sizeGB)<<30); err != nil {
		return "", fmt.Errorf("blank %d GB: %w", sizeGB, err)
	}
	// rename replaces a blank another process may have made meanwhile;
	// both are equivalent.
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("blank %d GB: %w", sizeGB, err)
	}
	p.log.Info("formatted blank image", "size_gb", sizeGB, "path", path)
	return path, nil
}

func (p *Pool) tmpName(kind string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return filepath.Join(p.path, "tmp", kind+"-"+hex.EncodeToString(b))
}

// cloneFile reflink-copies src to dst through a temporary file, and moves
// it into place only if dst does not exist, so a reader never sees a
// partial image and an existing image is never overwritten.
func (p *Pool) cloneFile(src, dst string) error {
	in, err := os.Open(src)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: %w", filepath.Base(src), sandbox.ErrNotFound)
	}
	if err != nil {
		return err
	}
	defer in.Close()
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%s: %w", filepath.Base(dst), sandbox.ErrAlreadyExists)
	}
	tmp := p.tmpName("clone")
	out, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("reflink %s: %w", filepath.Base(src), err)
	}
	err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if err != nil {
		os.Remove(tmp)
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("%s: %w", filepath.Base(dst), sandbox.ErrAlreadyExists)
		}
		return fmt.Errorf("rename into place: %w", err)
	}
	return nil
}

// MountImage mounts image name at mountpoint (created if missing) through
// an autoclear loop device, so UnmountImage alone frees the device.
// Mounting an image where it is already mounted is a no-op. It returns an
// error wrapping sandbox.ErrNotFound if the image does not exist and
// sandbox.ErrConflict if something else is mounted at mountpoint.
func (p *Pool) MountImage(ctx context.Context, name, mountpoint string) error {
	if err := validName(name); err != nil {
		return err
	}
	img := p.ImagePath(name)
	if _, err := os.Stat(img); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("image %s: %w", name, sandbox.ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("image %s: %w", name, err)
	}
	if err := os.MkdirAll(mountpoint, 0o755); err != nil {
		return fmt.Errorf("image %s: %w", name, err)
	}
	target, err := cleanPath(mountpoint)
	if err != nil {
		return fmt.Errorf("image %s: %w", name, err)
	}
	if dev, mounted, err := p.mountedDevice(target); err != nil {
		return fmt.Errorf("image %s: %w", name, err)
	} else if mounted {
		if backing, _ := loopBackingFile(dev); backing == img {
			return nil
		}
		return fmt.Errorf("image %s: %s already has %s mounted: %w", name, target, dev, sandbox.ErrConflict)
	}
	if err := mountLoop(img, target, imageMountOpts); err != nil {
		return fmt.Errorf("image %s: %w", name, err)
	}
	return nil
}

// mountedDevice returns the device mounted at target, if any.
func (p *Pool) mountedDevice(target string) (string, bool, error) {
	m, ok, err := findMount(target)
	if err != nil || !ok {
		return "", ok, err
	}
	return m.source, true, nil
}

// UnmountImage unmounts the image at mountpoint, which also frees its loop
// device. It is idempotent; a busy filesystem is detached lazily (and its
// loop device freed when the last user goes), which is logged.
func (p *Pool) UnmountImage(ctx context.Context, mountpoint string) error {
	lazy, err := unmount(mountpoint)
	if lazy {
		p.log.Warn("image was busy, unmounted lazily", "mountpoint", mountpoint)
	}
	return err
}

// RemoveImage deletes image name. It is idempotent. Removing a mounted
// image only unlinks it: its space is freed once it is unmounted.
func (p *Pool) RemoveImage(ctx context.Context, name string) error {
	if err := validName(name); err != nil {
		return err
	}
	if err := os.Remove(p.ImagePath(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("image %s: %w", name, err)
	}
	return nil
}

// GrowImage grows image name to newGB GiB and its filesystem with it. If
// mountpoint is not empty the image must be mounted there and grows online
// (truncate, loop capacity refresh, xfs_growfs); otherwise it is mounted
// briefly under Path()/tmp to grow. Images never shrink: a smaller size
// returns an error wrapping sandbox.ErrInvalidArgument. Growing to the
// current size re-runs the filesystem grow, finishing an interrupted one.
func (p *Pool) GrowImage(ctx context.Context, name, mountpoint string, newGB int) error {
	if err := validName(name); err != nil {
		return err
	}
	if err := validSize(newGB); err != nil {
		return err
	}
	img := p.ImagePath(name)
	st, err := os.Stat(img)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("image %s: %w", name, sandbox.ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("image %s: %w", name, err)
	}
	newSize := int64(newGB) << 30
	if newSize < st.Size() {
		return fmt.Errorf("image %s: cannot shrink from %d to %d bytes: %w", name, st.Size(), newSize, sandbox.ErrInvalidArgument)
	}

	if mountpoint == "" {
		tmp := p.tmpName("grow")
		if err := os.Mkdir(tmp, 0o700); err != nil {
			return fmt.Errorf("image %s: %w", name, err)
		}
		defer os.Remove(tmp)
		if err := os.Truncate(img, newSize); err != nil {
			return fmt.Errorf("image %s: grow file: %w", name, err)
		}
		if err := mountLoop(img, tmp, imageMountOpts); err != nil {
			return fmt.Errorf("image %s: %w", name, err)
		}
		defer unmount(tmp)
		if err := run(ctx, "xfs_growfs", "-d", tmp); err != nil {
			return fmt.Errorf("image %s: %w", name, err)
		}
		return nil
	}

	target, err := cleanPath(mountpoint)
	if err != nil {
		return fmt.Errorf("image %s: %w", name, err)
	}
	dev, mounted, err := p.mountedDevice(target)
	if err != nil {
		return fmt.Errorf("image %s: %w", name, err)
	}
	if !mounted {
		return fmt.Errorf("image %s: nothing mounted at %s: %w", name, target, sandbox.ErrInvalidArgument)
	}
	if backing, err := loopBackingFile(dev); err != nil || backing != img {
		return fmt.Errorf("image %s: %s is not mounted at %s: %w", name, img, target, sandbox.ErrInvalidArgument)
	}
	if err := os.Truncate(img, newSize); err != nil {
		return fmt.Errorf("image %s: grow file: %w", name, err)
	}
	if err := setLoopCapacity(dev); err != nil {
		return fmt.Errorf("image %s: %w", name, err)
	}
	if err := run(ctx, "xfs_growfs", "-d", target); err != nil {
		return fmt.Errorf("image %s: %w", name, err)
	}
	return nil
}

// CloneImage reflink-copies image src to a new image dst. If src is
// mounted, Freeze its filesystem first (and Thaw after) so the copy is
// consistent. It returns an error wrapping sandbox.ErrNotFound if src does
// not exist and sandbox.ErrAlreadyExists if dst does.
func (p *Pool) CloneImage(ctx context.Context, src, dst string) error {
	if err := validName(src); err != nil {
		return err
	}
	if err := validName(dst); err != nil {
		return err
	}
	if err := p.cloneFile(p.ImagePath(src), p.ImagePath(dst)); err != nil {
		return fmt.Errorf("clone %s to %s: %w", src, dst, err)
	}
	return nil
}
