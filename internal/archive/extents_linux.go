package archive

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// dataExtents asks the file system where src's data is (SEEK_DATA and
// SEEK_HOLE), so holes are skipped without reading zeros. It returns nil
// (unknown) for anything but an *os.File or if the file system cannot say.
// The file offset is left as it was; reads use ReadAt.
func dataExtents(src io.ReaderAt, size int64) *extents {
	f, ok := src.(*os.File)
	if !ok {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	var ex *extents
	rc.Control(func(fd uintptr) {
		cur, err := unix.Seek(int(fd), 0, io.SeekCurrent)
		if err != nil {
			return
		}
		defer unix.Seek(int(fd), cur, io.SeekStart)
		e := &extents{}
		for off := int64(0); off < size; {
			start, err := unix.Seek(int(fd), off, unix.SEEK_DATA)
			if errors.Is(err, unix.ENXIO) {
				break // no data at or after off
			}
			if err != nil || start >= size {
				if err != nil {
					return
				}
				break
			}
			end, err := unix.Seek(int(fd), start, unix.SEEK_HOLE)
			if err != nil {
				return
			}
			end = min(end, size)
			e.r = append(e.r, [2]int64{start, end})
			off = end
		}
		ex = e
	})
	return ex
}
