package controlplane

import (
	"fmt"

	"github.com/platinum-dev/platinum/internal/hostapi"
)

// NoSpaceError refuses a create or an upload because the host's data dir
// (sandbox disks, memory images, the store) is nearly full: sandbox disks
// are sparse, so letting more in would fail later and half-way (a guest's
// writes erroring, a checkpoint cut short). Nothing was made. The API
// answers 507 no_space (docs/operating.md, "Disk space").
type NoSpaceError struct {
	// Free is what the data dir had left; Min what ptd keeps free
	// (--min-free-mb); Need what the request brings (0: unknown).
	Free, Min, Need uint64
}

func (e *NoSpaceError) Error() string {
	s := fmt.Sprintf("the host's data dir has %d MiB free", e.Free>>20)
	if e.Need > 0 {
		s += fmt.Sprintf(" and this request brings %d MiB", e.Need>>20)
	}
	return s + fmt.Sprintf(", under the %d MiB ptd keeps free (--min-free-mb): nothing was made; free space on the host and try again", e.Min>>20)
}

// EnsureSpace returns a *NoSpaceError when the host's data dir would have
// less than Config.MinFreeBytes free after need more bytes. A host that
// cannot say, or a zero MinFreeBytes, lets everything through.
func (s *Service) EnsureSpace(need int64) error {
	sc, ok := s.host.(hostapi.SpaceChecker)
	if !ok || s.cfg.MinFreeBytes <= 0 {
		return nil
	}
	free, err := sc.DataDirFree()
	if err != nil {
		s.log.Warn("data dir free space", "err", err)
		return nil
	}
	n, minFree := uint64(max(need, 0)), uint64(s.cfg.MinFreeBytes)
	if free < minFree+n {
		return &NoSpaceError{Free: free, Min: minFree, Need: n}
	}
	return nil
}
