// Package listmerge merges the sandbox lists of several regions into the
// one order the API promises (docs/api.md, docs/ARCHITECTURE.md
// "Regions"): creation time descending, then ID descending. Times are
// compared at the store's native six fractional digits, so two rows made
// in the same millisecond in different regions are never a false tie,
// and walking offset pages of the merge yields every row once.
package listmerge

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Row is one list row: its ordering key and the row as its region wrote it.
type Row struct {
	CreatedAt time.Time
	ID        string
	Raw       json.RawMessage
}

// Parse reads a row's key (created_at and id) from its JSON. created_at
// is an RFC 3339 time with up to nanoseconds; the API writes six digits.
func Parse(raw json.RawMessage) (Row, error) {
	var k struct {
		ID        string `json:"id"`
		CreatedAt string `json:"created_at"`
	}
	if err := json.Unmarshal(raw, &k); err != nil {
		return Row{}, fmt.Errorf("list row: %w", err)
	}
	t, err := time.Parse(time.RFC3339Nano, k.CreatedAt)
	if err != nil || k.ID == "" {
		return Row{}, fmt.Errorf("list row %q: created_at %q: no usable key", k.ID, k.CreatedAt)
	}
	return Row{CreatedAt: t, ID: k.ID, Raw: raw}, nil
}

// Compare orders a before b (negative) when a is newer, or as new with
// the greater ID: the order of every list.
func Compare(a, b Row) int {
	return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID, a.ID))
}

// Merge returns rows [offset, offset+limit) of the merged order of lists.
// Each list must be in that order already and hold at least its own first
// offset+limit rows (fewer only when its region has no more): any row of
// the merged window is among its region's first offset+limit.
func Merge(lists [][]Row, offset, limit int) []Row {
	var all []Row
	for _, l := range lists {
		all = append(all, l...)
	}
	slices.SortStableFunc(all, Compare)
	if offset >= len(all) {
		return []Row{}
	}
	return all[offset:min(offset+limit, len(all))]
}
