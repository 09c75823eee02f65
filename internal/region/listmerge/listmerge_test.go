package listmerge

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// row is a list row as a region writes it.
func row(t *testing.T, id, created string) Row {
	t.Helper()
	r, err := Parse(json.RawMessage(fmt.Sprintf(`{"id":%q,"created_at":%q,"createdAt":%q}`, id, created, created)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ids(rows []Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// TestMergeOffsetPages walks every offset page of the merge with limits
// 1, 2 and 3, each region answering only its first offset+limit rows (as
// a region asked for a page does), and wants exactly the full order: no
// row twice, none missing. The rows of the regions interleave within one
// millisecond, so a merge at millisecond precision would tie them.
func TestMergeOffsetPages(t *testing.T) {
	tests := []struct {
		name    string
		regions [][][2]string // per region: id, created_at, newest first
		want    []string
	}{
		{
			name: "same millisecond, distinct microseconds",
			regions: [][][2]string{
				{{"sbx_a3", "2026-12-04T12:00:00.123906Z"}, {"sbx_a2", "2026-12-04T12:00:00.123504Z"}, {"sbx_a1", "2026-12-04T12:00:00.123001Z"}},
				{{"sbx_b3", "2026-12-04T12:00:00.123999Z"}, {"sbx_b2", "2026-12-04T12:00:00.123505Z"}, {"sbx_b1", "2026-12-04T12:00:00.123000Z"}},
			},
			want: []string{"sbx_b3", "sbx_a3", "sbx_b2", "sbx_a2", "sbx_a1", "sbx_b1"},
		},
		{
			name: "same microsecond: id descending",
			regions: [][][2]string{
				{{"sbx_c", "2026-12-04T12:00:00.500000Z"}, {"sbx_a", "2026-12-04T12:00:00.500000Z"}},
				{{"sbx_d", "2026-12-04T12:00:00.500000Z"}, {"sbx_b", "2026-12-04T12:00:00.500000Z"}},
				{{"sbx_e", "2026-12-04T11:59:59.999999Z"}},
			},
			want: []string{"sbx_d", "sbx_c", "sbx_b", "sbx_a", "sbx_e"},
		},
		{
			name: "one region empty",
			regions: [][][2]string{
				{},
				{{"sbx_2", "2026-12-04T12:00:00.000002Z"}, {"sbx_1", "2026-12-04T12:00:00.000001Z"}},
			},
			want: []string{"sbx_2", "sbx_1"},
		},
	}
	for _, tt := range tests {
		var regions [][]Row
		for _, rs := range tt.regions {
			var l []Row
			for _, r := range rs {
				l = append(l, row(t, r[0], r[1]))
			}
			regions = append(regions, l)
		}
		for _, limit := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/limit=%d", tt.name, limit), func(t *testing.T) {
				var walked []string
				for offset := 0; offset <= len(tt.want); offset += limit {
					var lists [][]Row
					for _, l := range regions {
						lists = append(lists, l[:min(offset+limit, len(l))])
					}
					walked = append(walked, ids(Merge(lists, offset, limit))...)
				}
				if diff := cmp.Diff(tt.want, walked); diff != "" {
					t.Errorf("pages (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, raw string
		ok        bool
	}{
		{"six digits", `{"id":"sbx_1","created_at":"2026-12-04T12:00:00.123456Z"}`, true},
		{"no id", `{"created_at":"2026-12-04T12:00:00.123456Z"}`, false},
		{"no time", `{"id":"sbx_1"}`, false},
		{"not an object", `[1]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(json.RawMessage(tt.raw))
			if (err == nil) != tt.ok {
				t.Fatalf("Parse(%s) = %v, want ok %v", tt.raw, err, tt.ok)
			}
			if tt.ok && r.CreatedAt.Nanosecond() != 123456000 {
				t.Errorf("created_at kept %d ns, want the six digits", r.CreatedAt.Nanosecond())
			}
		})
	}
	if !slices.IsSortedFunc([]Row{row(t, "sbx_b", "2026-12-04T12:00:00.000002Z"), row(t, "sbx_a", "2026-12-04T12:00:00.000001Z")}, Compare) {
		t.Error("newer row not first")
	}
}
