package network

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netnsDir is where iproute2 keeps named namespaces; using it keeps our
// namespaces visible to `ip netns` for debugging.
const netnsDir = "/run/netns"

var netnsDirOnce struct {
	sync.Mutex
	done bool
}

// ensureNetnsDir makes /run/netns a shared mount point, as iproute2 does, so
// that the bind mounts we create there propagate to (and their removal
// reaches) mount namespaces cloned later, such as a container's before its
// pivot_root. Without this a namespace could outlive Detach.
func ensureNetnsDir() error {
	netnsDirOnce.Lock()
	defer netnsDirOnce.Unlock()
	if netnsDirOnce.done {
		return nil
	}
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		return fmt.Errorf("netns dir: %w", err)
	}
	err := unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) {
		// Not a mount point yet: bind it onto itself, then share it.
		if err := unix.Mount(netnsDir, netnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("netns dir: bind: %w", err)
		}
		err = unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	}
	if err != nil {
		return fmt.Errorf("netns dir: make shared: %w", err)
	}
	netnsDirOnce.done = true
	return nil
}

// createNamedNetns creates a new network namespace pinned at
// /run/netns/name and returns an open handle to it. IPv6 is disabled inside
// it: the firewall is IPv4-only, and a sandbox must not reach the host over
// IPv6 link-local addresses.
//
// The namespace is made on a dedicated locked OS thread; if that thread
// cannot be moved back to the host namespace it is left locked so the Go
// runtime discards it instead of reusing a thread in the wrong namespace.
func createNamedNetns(name string) (netns.NsHandle, error) {
	if err := ensureNetnsDir(); err != nil {
		return netns.None(), err
	}
	path := filepath.Join(netnsDir, name)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return netns.None(), fmt.Errorf("netns %s: %w", name, err)
	}
	f.Close()

	err = onNetnsThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		return nil
	}, func() error {
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		if err := unix.Mount(self, path, "none", unix.MS_BIND, ""); err != nil {
			return err
		}
		return disableIPv6InCurrentNetns()
	})
	if err != nil {
		removeNamedNetns(name)
		return netns.None(), fmt.Errorf("netns %s: %w", name, err)
	}
	h, err := netns.GetFromPath(path)
	if err != nil {
		removeNamedNetns(name)
		return netns.None(), fmt.Errorf("netns %s: open: %w", name, err)
	}
	return h, nil
}

// onNetnsThread runs f on a locked OS thread that enter has moved into
// another network namespace, then moves the thread back. enter must leave
// the thread where it was when it fails. If the thread cannot be moved
// back it is left locked, so the Go runtime discards it with its goroutine
// instead of reusing a thread in the wrong namespace.
func onNetnsThread(enter, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := enter(); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		err = f()
		if serr := netns.Set(orig); serr != nil {
			// Leave the thread locked: it dies with this goroutine.
			errc <- errors.Join(err, fmt.Errorf("restore netns: %w", serr))
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// disableIPv6InCurrentNetns writes the calling thread's namespace sysctls
// (/proc/sys/net is per network namespace of the opener).
func disableIPv6InCurrentNetns() error {
	for _, p := range []string{
		"/proc/sys/net/ipv6/conf/all/disable_ipv6",
		"/proc/sys/net/ipv6/conf/default/disable_ipv6",
	} {
		if err := os.WriteFile(p, []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("disable ipv6: %w", err)
		}
	}
	return nil
}

// removeNamedNetns unpins and deletes /run/netns/name. Missing is fine.
// The namespace itself lives on while a process is still inside it.
func removeNamedNetns(name string) error {
	path := filepath.Join(netnsDir, name)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netns %s: unmount: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netns %s: remove: %w", name, err)
	}
	return nil
}
