//go:build !linux

package archive

import "io"

// dataExtents is unknown off Linux: every chunk is read and zero chunks are
// still found by content.
func dataExtents(io.ReaderAt, int64) *extents { return nil }
