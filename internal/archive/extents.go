package archive

import "sort"

// extents are the data ranges [start, end) of a sparse file, sorted. A nil
// *extents means unknown: every range may hold data.
type extents struct {
	r [][2]int64
}

// hasData reports whether [start, end) may overlap data.
func (e *extents) hasData(start, end int64) bool {
	if e == nil {
		return true
	}
	i := sort.Search(len(e.r), func(i int) bool { return e.r[i][1] > start })
	return i < len(e.r) && e.r[i][0] < end
}
