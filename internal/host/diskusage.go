package host

import (
	"context"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/hostapi"
)

var _ hostapi.DiskUsageReader = (*Host)(nil)

// DiskUsage implements hostapi.DiskUsageReader: the used and total
// bytes of the sandbox's mounted disk, from one statfs. It is what the
// disk autogrow timer reads for every running sandbox on every tick, so
// it avoids Metrics' runtime calls and CPU sampling window (two `runsc
// events` and 100 ms for gVisor).
func (h *Host) DiskUsage(ctx context.Context, id string) (used, size uint64, err error) {
	return mountedUsage(h.paths(id).diskMnt)
}

// mountedUsage statfs's mnt, refusing a directory that is not a mount
// point: its figures would be those of the data dir's file system.
func mountedUsage(mnt string) (used, size uint64, err error) {
	var st, parent unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil {
		return 0, 0, fmt.Errorf("host: disk usage: %w", err)
	}
	if err := unix.Stat(filepath.Dir(mnt), &parent); err == nil && parent.Dev == st.Dev {
		return 0, 0, fmt.Errorf("host: disk usage: %s is not mounted", mnt)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(mnt, &fs); err != nil {
		return 0, 0, fmt.Errorf("host: disk usage: %w", err)
	}
	return (fs.Blocks - fs.Bfree) * uint64(fs.Bsize), fs.Blocks * uint64(fs.Bsize), nil
}
