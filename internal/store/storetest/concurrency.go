package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// writers is how many goroutines the concurrency tests run at once.
const writers = 20

// testConcurrentCAS races writers updates built from one read, several
// rounds in a row: each round exactly one must win and every other must get
// ErrConflict (not a busy/locked error, not a lost update).
func testConcurrentCAS(t *testing.T, s store.Store) {
	ctx := t.Context()
	cur := mustCreate(t, s, newSandbox("org_a", base))
	const rounds = 5
	for round := range rounds {
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			wins   []sandbox.Sandbox
			others []error
		)
		start := make(chan struct{})
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				upd := cur
				upd.Name = fmt.Sprintf("round %d writer %d", round, w)
				if w%2 == 0 {
					upd.State = sandbox.StateRunning
				} else {
					upd.State = sandbox.StateStopped
				}
				<-start
				got, err := s.UpdateSandbox(ctx, upd)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					wins = append(wins, got)
				} else if !errors.Is(err, store.ErrConflict) {
					others = append(others, err)
				}
			}()
		}
		close(start)
		wg.Wait()

		for _, err := range others {
			t.Errorf("round %d: error other than ErrConflict: %v", round, err)
		}
		if len(wins) != 1 {
			t.Fatalf("round %d: %d winners, want exactly 1", round, len(wins))
		}
		got, err := s.GetSandbox(ctx, "", cur.ID)
		wantErr(t, "GetSandbox", err, nil)
		if got.Version != cur.Version+1 || got.Name != wins[0].Name {
			t.Fatalf("round %d: stored version %d name %q, want %d and the winner's %q",
				round, got.Version, got.Name, cur.Version+1, wins[0].Name)
		}
		cur = got
	}
	if cur.Version != 1+rounds {
		t.Errorf("final version %d, want %d", cur.Version, 1+rounds)
	}
}

// testConcurrentWriters has writers goroutines each update their own row and
// one shared row, retrying on ErrConflict. No update may be lost and every
// state change must leave exactly one event.
func testConcurrentWriters(t *testing.T, s store.Store) {
	ctx := t.Context()
	const perWriter = 10
	shared := mustCreate(t, s, newSandbox("org_a", base))
	own := make([]sandbox.Sandbox, writers)
	for i := range own {
		own[i] = mustCreate(t, s, newSandbox("org_a", base))
	}

	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				mine := own[w]
				for i := range perWriter {
					// Own row: no contention, must never conflict. Toggle
					// the state so every update writes an event.
					if mine.State == sandbox.StateRunning {
						mine.State = sandbox.StateStopped
					} else {
						mine.State = sandbox.StateRunning
					}
					var err error
					if mine, err = s.UpdateSandbox(ctx, mine); err != nil {
						return fmt.Errorf("writer %d own update %d: %w", w, i, err)
					}
					// Shared row: read, modify, write, retry on conflict.
					for {
						cur, err := s.GetSandbox(ctx, "org_a", shared.ID)
						if err != nil {
							return fmt.Errorf("writer %d: get shared: %w", w, err)
						}
						cur.Metadata = map[string]string{"last": fmt.Sprint(w)}
						if _, err = s.UpdateSandbox(ctx, cur); err == nil {
							break
						}
						if !errors.Is(err, store.ErrConflict) {
							return fmt.Errorf("writer %d shared update %d: %w", w, i, err)
						}
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		return
	}

	got, err := s.GetSandbox(ctx, "", shared.ID)
	wantErr(t, "GetSandbox shared", err, nil)
	if want := int64(1 + writers*perWriter); got.Version != want {
		t.Errorf("shared version %d, want %d (lost updates)", got.Version, want)
	}
	if n := len(eventsFor(t, s, shared.ID)); n != 0 {
		t.Errorf("shared row has %d events, want 0 (its state never changed)", n)
	}
	for i, sb := range own {
		got, err := s.GetSandbox(ctx, "", sb.ID)
		wantErr(t, "GetSandbox own", err, nil)
		if got.Version != 1+perWriter {
			t.Errorf("writer %d: version %d, want %d", i, got.Version, 1+perWriter)
		}
		if n := len(eventsFor(t, s, sb.ID)); n != perWriter {
			t.Errorf("writer %d: %d events, want %d", i, n, perWriter)
		}
	}
}
