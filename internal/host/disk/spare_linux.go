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
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/crashpoint"
)

// Spare disks: attaching a loop device and mounting XFS is the slowest and
// least predictable step of a create (5 ms idle, over 100 ms when the
// host's disk is busy), so the pool can keep a few images of each recently
// used size formatted and mounted ahead of time. A create then takes one:
// a rename of the image file to the sandbox's name (the loop device follows
// the inode, and its backing_file names the new path) and a move of the
// mount to the sandbox's mountpoint. Both are atomic; a crash between them
// leaves the sandbox's image mounted under spare-mnt, which the next
// EnableSpares or DropSpares unmounts, and the sandbox's start mounts it
// the ordinary way.
//
// Spares live in Path()/spare (images) and Path()/spare-mnt (mountpoints,
// under a private mount: the kernel refuses to move a mount whose parent
// mount is shared; see EnableSpares).

// refillDelay is how long after a take its refill starts.
const refillDelay = 200 * time.Millisecond

// EnableSpares drops what an earlier process left in the spare dirs, then
// keeps up to n mounted spares of each size TakeSpare has been asked for,
// and of each size in warm (made now, in the background). Each spare
// already has dirs (relative paths) made: a fresh filesystem's first
// inodes cost milliseconds. n <= 0 disables spares. Call it once;
// DropSpares stops it.
func (p *Pool) EnableSpares(ctx context.Context, n int, dirs []string, warm ...int) error {
	if err := p.DropSpares(ctx); err != nil {
		return err
	}
	if n <= 0 {
		return nil
	}
	for _, d := range []string{"spare", "spare-mnt"} {
		if err := os.MkdirAll(filepath.Join(p.path, d), 0o755); err != nil {
			return fmt.Errorf("spares: %w", err)
		}
	}
	// The kernel moves a mount only from under a private parent: our own
	// pool mount is made private; a host reflink dir (shared under
	// systemd) gets spare-mnt bound onto itself, private.
	privateDir := p.path
	if !p.loopMounted {
		privateDir = filepath.Join(p.path, "spare-mnt")
		if err := unix.Mount(privateDir, privateDir, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("spares: bind %s: %w", privateDir, err)
		}
	}
	if err := unix.Mount("", privateDir, "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("spares: make %s private: %w", privateDir, err)
	}
	p.spareMu.Lock()
	p.spareWant, p.spares, p.spareStop, p.spareDirs = n, map[int][]string{}, false, dirs
	p.spareMu.Unlock()
	for _, gb := range warm {
		p.refill(gb)
	}
	return nil
}

// TakeSpare gives image name a spare disk of sizeGB mounted at mountpoint
// and reports whether it did. false with a nil error means no spare was
// ready (the caller creates and mounts the image itself); a spare is made
// in the background for next time.
func (p *Pool) TakeSpare(ctx context.Context, name string, sizeGB int, mountpoint string) (bool, error) {
	if err := validName(name); err != nil {
		return false, err
	}
	p.spareMu.Lock()
	if p.spareWant <= 0 || p.spareStop {
		p.spareMu.Unlock()
		return false, nil
	}
	list := p.spares[sizeGB]
	if list == nil {
		p.spares[sizeGB] = []string{} // a size asked for: keep spares of it
	}
	var id string
	if len(list) > 0 {
		id, p.spares[sizeGB] = list[0], list[1:]
	}
	p.spareMu.Unlock()
	// Refill a moment later, when the create that takes this spare has
	// done its own work (runtime start, agent), not competing with it.
	time.AfterFunc(refillDelay, func() { p.refill(sizeGB) })
	if id == "" {
		return false, nil
	}
	img, mnt := p.spareImage(id), filepath.Join(p.path, "spare-mnt", id)
	if err := unix.Renameat2(unix.AT_FDCWD, img, unix.AT_FDCWD, p.ImagePath(name), unix.RENAME_NOREPLACE); err != nil {
		p.dropSpare(id)
		if errors.Is(err, unix.EEXIST) {
			return false, nil // the image exists: the caller mounts it
		}
		return false, fmt.Errorf("spare %s: %w", id, err)
	}
	crashpoint.Hit("disk.spare.renamed") // the image is the sandbox's, still mounted as a spare
	if err := os.MkdirAll(mountpoint, 0o755); err != nil {
		unmount(mnt)
		return false, fmt.Errorf("spare %s: %w", id, err)
	}
	if err := unix.Mount(mnt, mountpoint, "", unix.MS_MOVE, ""); err != nil {
		// The image is the sandbox's now: unmount it here and let the
		// caller mount it the ordinary way. EINVAL means the pool sits on a
		// shared mount (a host reflink dir under systemd): stop spares.
		p.log.Warn("spares: moving a mount failed; mounting normally", "err", err)
		if errors.Is(err, unix.EINVAL) {
			go p.DropSpares(context.Background())
		}
		if _, err := unmount(mnt); err != nil {
			return false, fmt.Errorf("spare %s: %w", id, err)
		}
		os.Remove(mnt)
		return false, nil
	}
	os.Remove(mnt)
	return true, nil
}

// refill starts making spares of sizeGB in the background until there
// are enough, unless that is already under way.
func (p *Pool) refill(sizeGB int) {
	p.spareMu.Lock()
	defer p.spareMu.Unlock()
	if p.spareWant <= 0 || p.spareStop || p.spareFilling[sizeGB] || len(p.spares[sizeGB]) >= p.spareWant {
		return
	}
	if p.spareFilling == nil {
		p.spareFilling = map[int]bool{}
	}
	p.spareFilling[sizeGB] = true
	p.spareWG.Add(1)
	go func() {
		defer p.spareWG.Done()
		for p.keepFilling(sizeGB, nil) {
			id, err := p.makeSpare(sizeGB)
			if err != nil {
				p.log.Warn("spares: making a spare disk failed", "size_gb", sizeGB, "err", err)
				p.keepFilling(sizeGB, err)
				return
			}
			p.spareMu.Lock()
			stop := p.spareStop
			if !stop {
				p.spares[sizeGB] = append(p.spares[sizeGB], id)
			}
			p.spareMu.Unlock()
			if stop {
				p.dropSpare(id)
			}
		}
	}()
}

// keepFilling reports whether the filler of sizeGB goes on (spares still
// wanted and no error); when it does not, it marks the filler done in the
// same critical section, so a take meanwhile starts a new one.
func (p *Pool) keepFilling(sizeGB int, err error) bool {
	p.spareMu.Lock()
	defer p.spareMu.Unlock()
	if err == nil && !p.spareStop && len(p.spares[sizeGB]) < p.spareWant {
		return true
	}
	p.spareFilling[sizeGB] = false
	return false
}

// makeSpare clones the blank of sizeGB and mounts it under spare-mnt.
func (p *Pool) makeSpare(sizeGB int) (string, error) {
	blank, err := p.blank(context.Background(), sizeGB)
	if err != nil {
		return "", err
	}
	b := make([]byte, 8)
	rand.Read(b)
	id := strconv.Itoa(sizeGB) + "g-" + hex.EncodeToString(b)
	img, mnt := p.spareImage(id), filepath.Join(p.path, "spare-mnt", id)
	if err := p.cloneFile(blank, img); err != nil {
		return "", err
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		os.Remove(img)
		return "", err
	}
	if err := mountLoop(img, mnt, imageMountOpts); err != nil {
		os.Remove(mnt)
		os.Remove(img)
		return "", err
	}
	for _, d := range p.spareDirs {
		if err := os.MkdirAll(filepath.Join(mnt, d), 0o755); err != nil {
			p.dropSpare(id)
			return "", err
		}
	}
	return id, nil
}

func (p *Pool) spareImage(id string) string { return filepath.Join(p.path, "spare", id+".img") }

// dropSpare unmounts spare id and removes it.
func (p *Pool) dropSpare(id string) {
	mnt := filepath.Join(p.path, "spare-mnt", id)
	if _, err := unmount(mnt); err != nil {
		p.log.Warn("spares: unmount", "spare", id, "err", err)
		return
	}
	os.Remove(mnt)
	os.Remove(p.spareImage(id))
}

// DropSpares stops making spares and unmounts and removes every spare,
// also those an earlier process left (`ptd reset`, start-up).
func (p *Pool) DropSpares(ctx context.Context) error {
	p.spareMu.Lock()
	p.spareStop = true
	p.spareMu.Unlock()
	p.spareWG.Wait()
	p.spareMu.Lock()
	p.spares = nil
	p.spareMu.Unlock()
	var errs []error
	mnts, _ := os.ReadDir(filepath.Join(p.path, "spare-mnt"))
	for _, e := range mnts {
		mnt := filepath.Join(p.path, "spare-mnt", e.Name())
		if _, err := unmount(mnt); err != nil {
			errs = append(errs, err)
			continue
		}
		os.Remove(mnt)
	}
	if _, err := os.Stat(filepath.Join(p.path, "spare-mnt")); err == nil && !p.loopMounted {
		// EnableSpares' private bind of spare-mnt (see there).
		if _, err := unmount(filepath.Join(p.path, "spare-mnt")); err != nil {
			errs = append(errs, err)
		}
	}
	imgs, _ := os.ReadDir(filepath.Join(p.path, "spare"))
	for _, e := range imgs {
		if strings.HasSuffix(e.Name(), ".img") {
			os.Remove(filepath.Join(p.path, "spare", e.Name()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("spares: %w", err)
	}
	return nil
}
