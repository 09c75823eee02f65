package disk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// attachLoop binds a free loop device to the file at path with autoclear
// set, and returns the device path and an open handle to it. The caller
// mounts the device and then closes the handle: from then on the mount
// holds the device, and unmounting frees it. Closing the handle without
// mounting frees it at once, so an error path cannot leak a device.
func attachLoop(path string) (string, *os.File, error) {
	backing, err := os.OpenFile(path, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("loop: %w", err)
	}
	defer backing.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("loop: %w", err)
	}
	defer ctl.Close()

	cfg := unix.LoopConfig{Fd: uint32(backing.Fd())}
	cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
	copy(cfg.Info.File_name[:unix.LO_NAME_SIZE-1], path)

	var lastErr error
	for attempt := 0; attempt < 50; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("loop: get free device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		f, err := openLoopDevice(dev)
		if err != nil {
			return "", nil, err
		}
		err = unix.IoctlLoopConfigure(int(f.Fd()), &cfg)
		if err == nil {
			return dev, f, nil
		}
		f.Close()
		lastErr = err
		if !errors.Is(err, unix.EBUSY) {
			return "", nil, fmt.Errorf("loop: configure %s: %w", dev, err)
		}
		// Another process took the device between GET_FREE and
		// CONFIGURE; ask for the next free one.
	}
	return "", nil, fmt.Errorf("loop: no free device: %w", lastErr)
}

// openLoopDevice opens /dev/loopN, which devtmpfs creates right after
// LOOP_CTL_GET_FREE adds the device; wait briefly if it is not there yet.
func openLoopDevice(dev string) (*os.File, error) {
	for i := 0; ; i++ {
		f, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
		if err == nil || !errors.Is(err, os.ErrNotExist) || i == 100 {
			if err != nil {
				return nil, fmt.Errorf("loop: %w", err)
			}
			return f, nil
		}
		time.Sleep(time.Millisecond)
	}
}

// loopBackingFile returns the file a loop device (/dev/loopN) is bound to.
func loopBackingFile(dev string) (string, error) {
	name := filepath.Base(dev)
	if !strings.HasPrefix(name, "loop") {
		return "", fmt.Errorf("%s is not a loop device", dev)
	}
	b, err := os.ReadFile(filepath.Join("/sys/block", name, "loop", "backing_file"))
	if err != nil {
		return "", fmt.Errorf("loop %s: backing file: %w", dev, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// setLoopCapacity makes a loop device pick up its backing file's new size
// (what `losetup -c` does).
func setLoopCapacity(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loop: %w", err)
	}
	defer f.Close()
	if _, err := unix.IoctlRetInt(int(f.Fd()), unix.LOOP_SET_CAPACITY); err != nil {
		return fmt.Errorf("loop %s: set capacity: %w", dev, err)
	}
	return nil
}

// boundLoop is a loop device and the file it was bound to.
type boundLoop struct{ dev, backing string }

// autoclearLoop returns source's loop binding if source is a loop device
// with autoclear set, else the zero value.
func autoclearLoop(source string) boundLoop {
	name := filepath.Base(source)
	if !strings.HasPrefix(source, "/dev/loop") {
		return boundLoop{}
	}
	b, err := os.ReadFile(filepath.Join("/sys/block", name, "loop", "autoclear"))
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		return boundLoop{}
	}
	backing, err := loopBackingFile(source)
	if err != nil {
		return boundLoop{}
	}
	return boundLoop{dev: source, backing: backing}
}

// waitReleased waits (briefly, bounded) until the kernel has finished the
// autoclear of l. The kernel detaches an autoclear device from a work
// queue after the last close, so right after umount(2) returns the device
// may still hold its backing file open: removing the image would not free
// its space yet, and unmounting the pool holding it would fail as busy.
func (l boundLoop) waitReleased() {
	delay := 100 * time.Microsecond
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if backing, err := loopBackingFile(l.dev); err != nil || backing != l.backing {
			return // detached (or already reused for another file)
		}
		time.Sleep(delay)
		delay = min(2*delay, 10*time.Millisecond)
	}
}

// LoopBackingFiles returns the backing file of every attached loop device
// on the host (a file since unlinked ends in " (deleted)").
func LoopBackingFiles() []string {
	matches, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, m := range matches {
		if b, err := os.ReadFile(m); err == nil {
			if s := strings.TrimSpace(string(b)); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
