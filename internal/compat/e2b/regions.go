package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/region"
)

// RegionLists are E2B's sandbox lists answered with every region's
// sandboxes (docs/compatibility.md): GET /v2/sandboxes, whose keyset
// cursor (startedAt, sandboxID) means the same in every region, the
// unpaged GET /sandboxes, GET /sandboxes/metrics, whose sandbox_ids
// may name sandboxes of several regions, and GET /snapshots (the
// sandboxes' snapshots), whose cursor, a snapshot ID, does too.
// Templates are per region and are not merged.
func RegionLists() []region.List {
	return []region.List{
		region.NewList(http.MethodGet, "/v2/sandboxes", validList, listPart, mergeList(true)),
		region.NewList(http.MethodGet, "/sandboxes", validList, listPart, mergeList(false)),
		region.NewList(http.MethodGet, "/sandboxes/metrics", validMetricsQuery, metricsPart, mergeMetrics),
		region.NewList(http.MethodGet, "/snapshots", validSnapshotQuery, snapshotPart, mergeSnapshots),
	}
}

// validSnapshotQuery reports whether the snapshot list's query is one
// listSnapshots accepts.
func validSnapshotQuery(in *http.Request) bool {
	_, err := parseSnapshotQuery(in.URL.Query())
	return err == nil
}

// snapshotPage is one region's page of snapshots, or the 404 of a
// region that does not hold the sandbox the query names.
type snapshotPage struct {
	rows    []snapshotView
	more    bool
	missing *region.Refused
}

// snapshotPart asks a region for its own page of the caller's query:
// with the same cursor and limit, it holds every one of the region's
// snapshots the merged page can have. A sandbox lives in one region, so
// the others answer a sandboxID query with 404: no rows from them.
func snapshotPart(in *http.Request, get region.Get) (snapshotPage, error) {
	body, hdr, err := get(in.URL.Query())
	var refused *region.Refused
	if errors.As(err, &refused) && refused.Status == http.StatusNotFound && in.URL.Query().Get("sandboxID") != "" {
		return snapshotPage{missing: refused}, nil
	}
	if err != nil {
		return snapshotPage{}, err
	}
	p := snapshotPage{more: hdr.Get("X-Next-Token") != ""}
	if err := json.Unmarshal(body, &p.rows); err != nil {
		return snapshotPage{}, fmt.Errorf("snapshots: %w", err)
	}
	return p, nil
}

// mergeSnapshots writes the merged page: every region's rows in ID
// order (newest first), the first limit of them, with X-Next-Token at
// the last when more follow, as one region's list does. When no region
// holds the named sandbox, this region's 404 is the answer.
func mergeSnapshots(w http.ResponseWriter, in *http.Request, parts []snapshotPage) {
	sq, _ := parseSnapshotQuery(in.URL.Query()) // valid: validSnapshotQuery passed it
	var rows []snapshotView
	more, found := false, false
	for _, p := range parts {
		rows, more, found = append(rows, p.rows...), more || p.more, found || p.missing == nil
	}
	if !found {
		for k, v := range parts[0].missing.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(parts[0].missing.Status)
		w.Write(parts[0].missing.Body)
		return
	}
	slices.SortFunc(rows, func(a, b snapshotView) int { return strings.Compare(b.SnapshotID, a.SnapshotID) })
	if len(rows) > sq.limit {
		rows, more = rows[:sq.limit], true
	}
	if more && len(rows) > 0 {
		w.Header().Set("X-Next-Token", rows[len(rows)-1].SnapshotID)
	}
	if rows == nil {
		rows = []snapshotView{}
	}
	writeJSON(w, http.StatusOK, rows)
}

// validMetricsQuery reports whether the batch metrics query names 1 to
// 100 sandboxes, as batchMetrics accepts.
func validMetricsQuery(in *http.Request) bool {
	_, err := metricsIDs(in.URL.Query())
	return err == nil
}

// metricsPart is one region's samples: it answers for the named
// sandboxes it holds and leaves out the rest, as for an unknown one.
func metricsPart(in *http.Request, get region.Get) (map[string]json.RawMessage, error) {
	body, _, err := get(in.URL.Query())
	if err != nil {
		return nil, err
	}
	var part struct {
		Sandboxes map[string]json.RawMessage `json:"sandboxes"`
	}
	if err := json.Unmarshal(body, &part); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return part.Sandboxes, nil
}

// mergeMetrics writes every region's samples as one answer. A sandbox
// lives in one region, so no two parts name the same one.
func mergeMetrics(w http.ResponseWriter, _ *http.Request, parts []map[string]json.RawMessage) {
	out := map[string]json.RawMessage{}
	for _, p := range parts {
		maps.Copy(out, p)
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
}

// validList reports whether the list's query is one E2B's list accepts;
// one it refuses is answered by this region alone.
func validList(in *http.Request) bool {
	_, err := parseListQuery(in.URL.Query()) // the same for both lists
	return err == nil
}

// regionPage is one region's page of a list: its rows in its order, and
// whether it has more after them.
type regionPage struct {
	rows []listRow
	more bool
}

// listRow is a list row as its region wrote it, with its place in the
// (startedAt, sandboxID) order.
type listRow struct {
	key listCursor
	raw json.RawMessage
}

// listPart asks a region for its own page of the caller's query: with the
// same cursor and limit, a region's first limit rows after the cursor
// hold every one of its rows the merged page can have.
func listPart(in *http.Request, get region.Get) (regionPage, error) {
	body, hdr, err := get(in.URL.Query())
	if err != nil {
		return regionPage{}, err
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return regionPage{}, fmt.Errorf("list: %w", err)
	}
	p := regionPage{rows: make([]listRow, len(raws)), more: hdr.Get("X-Next-Token") != ""}
	for i, raw := range raws {
		var k struct {
			SandboxID string `json:"sandboxID"`
			StartedAt string `json:"startedAt"`
		}
		if err := json.Unmarshal(raw, &k); err != nil {
			return regionPage{}, fmt.Errorf("list row: %w", err)
		}
		at, err := time.Parse(time.RFC3339Nano, k.StartedAt)
		if err != nil || k.SandboxID == "" {
			return regionPage{}, fmt.Errorf("list row %q: startedAt %q: no usable key", k.SandboxID, k.StartedAt)
		}
		p.rows[i] = listRow{key: listCursor{at: at.UTC(), id: k.SandboxID}, raw: raw}
	}
	return p, nil
}

// mergeList writes the merged list in the order the query asks for: the
// first limit rows and, when more rows follow (beyond the page, or in a
// region that has more), X-Next-Token at the page's last row, as one
// region's list does. The unpaged list has no limit and no token.
func mergeList(v2 bool) func(http.ResponseWriter, *http.Request, []regionPage) {
	return func(w http.ResponseWriter, in *http.Request, parts []regionPage) {
		lq, _ := listQueryOf(in.URL.Query(), v2) // valid: validList passed it
		var rows []listRow
		more := false
		for _, p := range parts {
			rows, more = append(rows, p.rows...), more || p.more
		}
		slices.SortFunc(rows, func(a, b listRow) int {
			if lq.asc {
				return compareCursor(a.key, b.key)
			}
			return compareCursor(b.key, a.key)
		})
		if len(rows) > lq.limit {
			rows, more = rows[:lq.limit], true
		}
		if more && len(rows) > 0 {
			w.Header().Set("X-Next-Token", rows[len(rows)-1].key.token())
		}
		out := make([]json.RawMessage, len(rows))
		for i, r := range rows {
			out[i] = r.raw
		}
		writeJSON(w, http.StatusOK, out)
	}
}
