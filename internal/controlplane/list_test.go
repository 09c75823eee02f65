package controlplane

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// byListOrder reports whether rows are newest first, then ID descending.
func byListOrder(rows []sandbox.Sandbox) bool {
	return slices.IsSortedFunc(rows, func(a, b sandbox.Sandbox) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}

// TestListPagesWhileCreating: docs/sandboxes.md's List. Without a limit a page has
// 50 rows; every page, read while other sandboxes are being created, is
// ordered and agrees with its own total (one snapshot); once creation
// stops, walking the pages yields every sandbox exactly once.
func TestListPagesWhileCreating(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	const n, limit = 60, 7
	var wg sync.WaitGroup
	errs := make(chan error, n)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range n {
			if _, err := s.Create(ctx, org, CreateRequest{Template: "busybox"}); err != nil {
				errs <- err
				return
			}
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
		}
		for offset := 0; ; offset += limit {
			rows, total, err := s.List(ctx, org, ListRequest{Limit: limit, Offset: offset, Include: []string{"failed"}})
			if err != nil {
				t.Fatal(err)
			}
			if want := min(limit, max(total-offset, 0)); len(rows) != want {
				t.Fatalf("offset %d: %d rows for total %d: page and total from different snapshots", offset, len(rows), total)
			}
			if !byListOrder(rows) {
				t.Fatalf("offset %d: rows out of order", offset)
			}
			if offset+limit >= total {
				break
			}
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var all []sandbox.Sandbox
	for offset := 0; ; offset += limit {
		rows, total, err := s.List(ctx, org, ListRequest{Limit: limit, Offset: offset, Include: []string{"failed"}})
		if err != nil || total != n {
			t.Fatalf("total %d, want %d: %v", total, n, err)
		}
		all = append(all, rows...)
		if len(rows) < limit {
			break
		}
	}
	ids := map[string]bool{}
	for _, sb := range all {
		ids[sb.ID] = true
	}
	if len(all) != n || len(ids) != n || !byListOrder(all) {
		t.Errorf("pages joined: %d rows, %d distinct, ordered %v", len(all), len(ids), byListOrder(all))
	}
	rows, total, err := s.List(ctx, org, ListRequest{Include: []string{"failed"}})
	if err != nil || len(rows) != 50 || total != n {
		t.Errorf("default page: %d rows of %d (%v), want 50", len(rows), total, err)
	}
	if _, _, err := s.List(ctx, org, ListRequest{Limit: 201}); err == nil {
		t.Error("limit 201 accepted")
	}
}
