package tenancy

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/pgtest"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestQuotaAcrossProcesses: two tenancy services on two connections to
// one PostgreSQL store (two ptd processes) race creates for an org whose
// quota is one sandbox, as the control plane does them (lock, check,
// create, unlock): every round exactly one create gets in.
func TestQuotaAcrossProcesses(t *testing.T) {
	ctx := t.Context()
	url := pgtest.NewDatabase(t)
	var svcs []*Service
	for range 2 {
		st, err := postgres.Open(ctx, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		cfg := DefaultConfig()
		cfg.OrgMaxSandboxes = 1
		svcs = append(svcs, New(cfg, st, slog.New(slog.DiscardHandler)))
	}
	for round := range 10 {
		org := fmt.Sprintf("org_round%d", round)
		var created atomic.Int32
		var wg sync.WaitGroup
		for i := range 6 {
			s := svcs[i%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				unlock, err := s.LockQuota(ctx, org)
				if err != nil {
					t.Error(err)
					return
				}
				defer unlock()
				if err := s.CheckQuota(ctx, org, 1, 256); err != nil {
					return
				}
				now := time.Now().UTC().Truncate(time.Microsecond)
				sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: org, Template: "busybox",
					State: sandbox.StateCreating, CPU: 1, RAMMB: 256, DiskGB: 1, CreatedAt: now, UpdatedAt: now}
				if err := s.store.CreateSandbox(ctx, sb); err != nil {
					t.Error(err)
					return
				}
				created.Add(1)
			}()
		}
		wg.Wait()
		if n := created.Load(); n != 1 {
			t.Fatalf("round %d: %d creates passed a quota of one sandbox", round, n)
		}
	}
}
