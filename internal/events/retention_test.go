package events

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// TestEventRetention: pruning drops old events but keeps those a pending
// webhook delivery needs and the usage history of sandboxes whose record
// exists; a feed cursor older than what was pruned is refused with
// EventsPrunedError naming where to resume, a newer one and 0 are served.
func TestEventRetention(t *testing.T) {
	s, st := newTestService(t)
	ctx := context.Background()
	// A sandbox whose record exists: its usage history is kept.
	sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: org.OrgID, State: sandbox.StateRunning,
		Template: "busybox", CPU: 1, RAMMB: 512, DiskGB: 1}
	if err := st.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	add := func(sbx, typ string) int64 {
		t.Helper()
		if err := st.AddEvent(ctx, "org_a", sbx, typ, map[string]string{"k": "v"}); err != nil {
			t.Fatal(err)
		}
		evs, err := st.ListEvents(ctx, store.EventQuery{OrgID: "org_a"})
		if err != nil {
			t.Fatal(err)
		}
		// The newest event of this kind (creating the record wrote one).
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].SandboxID == sbx && evs[i].Type == typ {
				return evs[i].ID
			}
		}
		t.Fatalf("event %s of %q not listed", typ, sbx)
		return 0
	}
	gone := add("sbx_gone", "state_changed") // usage of a purged sandbox: pruned
	art := add(sb.ID, "artifact_created")    // not usage history: pruned
	usage := add(sb.ID, "resized")           // usage history of a live record: kept
	wh, err := st.CreateWebhook(ctx, store.Webhook{ID: "whk_1", OrgID: "org_a", URL: "https://example.invalid/", Secret: "s"})
	if err != nil {
		t.Fatal(err)
	}
	pending := add("sbx_gone", "session_status_changed") // a pending delivery needs it: kept
	if err := st.AdvanceWebhook(ctx, wh.ID, wh.Cursor, pending, []int64{pending}); err != nil {
		t.Fatal(err)
	}
	last := add("", "artifact_created") // pruned too: the newest pruned sets the watermark

	if _, err := st.PruneEvents(ctx, time.Now().Add(time.Hour), 1000); err != nil {
		t.Fatal(err)
	}
	evs, err := st.ListEvents(ctx, store.EventQuery{OrgID: "org_a"})
	if err != nil {
		t.Fatal(err)
	}
	kept := map[int64]bool{}
	for _, e := range evs {
		kept[e.ID] = true
	}
	got := map[string]bool{"gone": kept[gone], "artifact": kept[art], "usage": kept[usage], "pending": kept[pending], "last": kept[last]}
	want := map[string]bool{"gone": false, "artifact": false, "usage": true, "pending": true, "last": false}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("kept after pruning (-want +got):\n%s", d)
	}
	through, err := st.EventsPrunedThrough(ctx)
	if err != nil || through != last {
		t.Fatalf("pruned through %d (%v), want %d", through, err, last)
	}

	tests := []struct {
		name   string
		after  int64
		pruned bool
	}{
		{"from the start", 0, false},
		{"older than the pruned", gone, true},
		{"just below the watermark", last - 1, true},
		{"at the watermark", last, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Events(ctx, org, EventFilter{}, tc.after, 10)
			var pe *EventsPrunedError
			if errors.As(err, &pe) != tc.pruned {
				t.Fatalf("Events(after=%d): %v, want pruned %v", tc.after, err, tc.pruned)
			}
			if tc.pruned && pe.PrunedThrough != last {
				t.Errorf("resume point %d, want %d", pe.PrunedThrough, last)
			}
		})
	}
}
