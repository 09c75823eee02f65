// Command store measures the metadata store's hot operations on both
// implementations in one run: SQLite (the embedded default, a file in a
// temp dir) is the baseline and PostgreSQL (a throwaway local cluster on a
// unix socket, started as internal/pgtest starts it: fsync off, so commits
// cost what SQLite's WAL with synchronous=NORMAL costs, no disk flush) is
// measured beside it. Each operation runs in alternating rounds on the two
// stores, so both see the same machine load. It prints p50/p95/p99 per
// operation and store and PostgreSQL's p50 ratio against SQLite's. With
// -remote (the default) it also measures a remote store
// (internal/store/remote: a host's store.Store over loopback HTTP) in
// front of PostgreSQL, against PostgreSQL.
//
// The warm pools' demand (store.PoolDemandStore) is measured as the pool
// loop and the creates use it (internal/sessions, readDemand): one claim
// written per claim; each pass's read of the claims being handed over,
// and for auto pools of the claims since the last pass (less a 30 s
// overlap) and the boots; and the full read of the window (-claims
// claims over three pools) a pass makes once a minute.
//
//	go run ./bench/store [-n 2000] [-rows 1000] [-claims 3000] [-c 8] [-round 100] [-remote=false]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/pgtest"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/postgres"
	"github.com/platinum-dev/platinum/internal/store/remote"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
)

func main() { benchkit.Main("bench/store", run) }

// subject is one store under measurement with the records it was seeded
// with.
type subject struct {
	name  string
	st    store.Store
	ids   []string // sandboxes of org_bench
	token string   // a token hash
	// demandAt is when the pool claims were seeded (the newest's At).
	demandAt time.Time
}

func run() error {
	n := flag.Int("n", 2000, "measured calls per operation and store")
	rows := flag.Int("rows", 1000, "sandboxes seeded in each store (the list pages through them)")
	claims := flag.Int("claims", 3000, "pool claims seeded in each store's demand window, over three pools")
	conns := flag.Int("c", 8, "concurrent writers for the concurrent operations")
	round := flag.Int("round", 100, "calls per round; rounds alternate between the stores")
	remoteToo := flag.Bool("remote", true, "also measure a remote store (HTTP over loopback) in front of PostgreSQL, against PostgreSQL")
	flag.Parse()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)

	dir, err := os.MkdirTemp("", "bench-store-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lite, err := sqlite.Open(ctx, filepath.Join(dir, "platinum.db"), log)
	if err != nil {
		return err
	}
	defer lite.Close()
	cluster, err := pgtest.Start(ctx)
	if err != nil {
		return err
	}
	defer cluster.Stop()
	url, err := cluster.CreateDatabase(ctx, "platinum")
	if err != nil {
		return err
	}
	pg, err := postgres.Open(ctx, url, log)
	if err != nil {
		return err
	}
	defer pg.Close()

	subjects := []*subject{{name: "sqlite", st: lite}, {name: "postgres", st: pg}}
	if *remoteToo {
		// A host that joined an api ptd: a store.Store over loopback HTTP
		// (internal/store/remote) in front of a PostgreSQL store of its
		// own database on the same cluster.
		url, err := cluster.CreateDatabase(ctx, "remote")
		if err != nil {
			return err
		}
		behind, err := postgres.Open(ctx, url, log)
		if err != nil {
			return err
		}
		defer behind.Close()
		srv := httptest.NewServer(remote.NewHandler(behind, func(*http.Request) bool { return true }, nil, log))
		defer srv.Close()
		c, err := remote.Dial(ctx, srv.URL, "bench", log)
		if err != nil {
			return err
		}
		defer c.Close()
		subjects = append(subjects, &subject{name: "remote", st: c})
	}
	for _, s := range subjects {
		if err := seed(ctx, s, *rows); err != nil {
			return fmt.Errorf("seed %s: %w", s.name, err)
		}
		if err := seedDemand(ctx, s, *claims); err != nil {
			return fmt.Errorf("seed %s demand: %w", s.name, err)
		}
	}

	type op struct {
		name string
		// call runs the i-th call on s; concurrent ops are called from
		// several goroutines at once.
		call       func(s *subject, i int) error
		concurrent bool
	}
	ops := []op{
		{"GetSandbox (point read)", func(s *subject, i int) error {
			_, err := s.st.GetSandbox(ctx, "org_bench", s.ids[i%len(s.ids)])
			return err
		}, false},
		{"TokenByHash (every request's auth)", func(s *subject, _ int) error {
			_, err := s.st.TokenByHash(ctx, s.token)
			return err
		}, false},
		{"ListSandboxes 50 + total (paginated)", func(s *subject, i int) error {
			_, _, err := s.st.ListSandboxes(ctx, store.ListOptions{OrgID: "org_bench", Limit: 50, Offset: (i * 50) % len(s.ids)})
			return err
		}, false},
		{"GetSandbox + UpdateSandbox, state change + event", func(s *subject, i int) error {
			return toggle(ctx, s.st, s.ids[i%len(s.ids)])
		}, false},
		{"ModifySandbox env merge, one row, -c at once", func(s *subject, i int) error {
			_, err := s.st.ModifySandbox(ctx, "", s.ids[0], func(sb *sandbox.Sandbox) error {
				sb.Env["K"+strconv.Itoa(i%16)] = strconv.Itoa(i)
				return nil
			})
			return err
		}, true},
		{"AddEvent, -c at once", func(s *subject, i int) error {
			return s.st.AddEvent(ctx, "org_bench", s.ids[i%len(s.ids)], "bench", map[string]int{"i": i})
		}, true},
		{"PoolClaims handing over (a pass's demand read, no pool auto)", func(s *subject, _ int) error {
			_, err := s.st.PoolClaims(ctx, store.PoolClaimQuery{Since: time.Now().Add(-time.Minute), HandingOver: true})
			return err
		}, false},
		{"PoolClaims since 31 s + PoolBoots (a pass's auto-pool read)", func(s *subject, _ int) error {
			_, err := s.st.PoolClaims(ctx, store.PoolClaimQuery{Since: time.Now().Add(-31 * time.Second), Templates: poolTemplates, PerPool: 4096})
			if err == nil {
				_, err = s.st.PoolBoots(ctx)
			}
			return err
		}, false},
		{"PoolClaims of the 5 min window (a full read, once a minute)", func(s *subject, _ int) error {
			// The window of the seeding, not of now: the seeded claims span
			// 4 minutes, and a run longer than a minute would see fewer.
			cs, err := s.st.PoolClaims(ctx, store.PoolClaimQuery{Since: s.demandAt.Add(-5 * time.Minute), Templates: poolTemplates, PerPool: 4096})
			if err == nil && len(cs) < *claims {
				err = fmt.Errorf("read %d claims, seeded %d", len(cs), *claims)
			}
			return err
		}, false},
		{"AddPoolClaim (one per claim), -c at once", func(s *subject, i int) error {
			return s.st.AddPoolClaim(ctx, store.PoolClaim{ID: sandbox.NewID("pcl_"), Template: poolTemplates[i%len(poolTemplates)], Warm: true})
		}, true},
	}

	fmt.Printf("Platinum metadata store: SQLite (baseline) vs PostgreSQL, %d calls per operation, %d seeded sandboxes, %d concurrent callers where marked, %s\n\n",
		*n, *rows, *conns, time.Now().UTC().Format(time.RFC3339))
	for _, o := range ops {
		lat := map[string][]time.Duration{}
		wall := map[string]time.Duration{}
		for done := 0; done < *n; done += *round {
			k := min(*round, *n-done)
			for _, s := range subjects {
				t0 := time.Now()
				ds, err := measure(s, done, k, o.concurrent, *conns, o.call)
				if err != nil {
					return fmt.Errorf("%s on %s: %w", o.name, s.name, err)
				}
				wall[s.name] += time.Since(t0)
				lat[s.name] = append(lat[s.name], ds...)
			}
		}
		fmt.Println(o.name)
		benchkit.Report("  sqlite", lat["sqlite"], nil)
		benchkit.Report("  postgres", lat["postgres"], lat["sqlite"])
		benchkit.Report("  remote (vs postgres)", lat["remote"], lat["postgres"])
		if o.concurrent {
			fmt.Printf("  %-40s sqlite %.0f/s, postgres %.0f/s", "throughput", float64(*n)/wall["sqlite"].Seconds(), float64(*n)/wall["postgres"].Seconds())
			if *remoteToo {
				fmt.Printf(", remote %.0f/s", float64(*n)/wall["remote"].Seconds())
			}
			fmt.Println()
		}
	}
	return nil
}

// measure runs calls first..first+k-1 of call on s, from conns goroutines
// when concurrent, and returns each call's latency.
func measure(s *subject, first, k int, concurrent bool, conns int, call func(*subject, int) error) ([]time.Duration, error) {
	if !concurrent {
		out := make([]time.Duration, 0, k)
		for i := first; i < first+k; i++ {
			t0 := time.Now()
			if err := call(s, i); err != nil {
				return nil, err
			}
			out = append(out, time.Since(t0))
		}
		return out, nil
	}
	out := make([]time.Duration, k)
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	next := make(chan int)
	for range conns {
		wg.Go(func() {
			for i := range next {
				t0 := time.Now()
				if err := call(s, first+i); err != nil {
					errs <- err
					return
				}
				out[i] = time.Since(t0)
			}
		})
	}
	for i := range k {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return out, <-errs
}

// seed creates an org, a token and rows sandboxes in s.
func seed(ctx context.Context, s *subject, rows int) error {
	if err := s.st.CreateOrg(ctx, store.Org{ID: "org_bench", Name: "bench"}); err != nil {
		return err
	}
	s.token = fmt.Sprintf("%064x", 42)
	if err := s.st.CreateToken(ctx, store.Token{ID: sandbox.NewID(sandbox.PrefixToken), OrgID: "org_bench", Role: store.RoleAdmin, Hash: s.token}); err != nil {
		return err
	}
	base := time.Now().UTC()
	for i := range rows {
		sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: "org_bench", State: sandbox.StateRunning,
			Template: "busybox", CPU: 1, RAMMB: 512, DiskGB: 10, Env: map[string]string{"A": "b"},
			Metadata: map[string]string{"owner": "bench"}, CreatedAt: base.Add(time.Duration(i) * time.Microsecond)}
		if err := s.st.CreateSandbox(ctx, sb); err != nil {
			return err
		}
		s.ids = append(s.ids, sb.ID)
	}
	return nil
}

// toggle moves a sandbox between running and stopped (a state change, so
// an event row too), retrying on a version conflict.
func toggle(ctx context.Context, st store.Store, id string) error {
	for {
		sb, err := st.GetSandbox(ctx, "", id)
		if err != nil {
			return err
		}
		if sb.State == sandbox.StateRunning {
			sb.State = sandbox.StateStopped
		} else {
			sb.State = sandbox.StateRunning
		}
		if _, err = st.UpdateSandbox(ctx, sb); !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
}

// poolTemplates are the pools seedDemand spreads claims over.
var poolTemplates = []string{"busybox", "alpine", "python"}

// seedDemand records claims pool claims spread over the last 4 minutes
// (within the demand window) and 8 boots per pool.
func seedDemand(ctx context.Context, s *subject, claims int) error {
	now := time.Now().UTC()
	s.demandAt = now
	for i := range claims {
		c := store.PoolClaim{ID: sandbox.NewID("pcl_"), Template: poolTemplates[i%len(poolTemplates)],
			At: now.Add(-time.Duration(i) * 4 * time.Minute / time.Duration(max(claims, 1))), Warm: i%2 == 0}
		if err := s.st.AddPoolClaim(ctx, c); err != nil {
			return err
		}
	}
	for _, tpl := range poolTemplates {
		for i := range 8 {
			if err := s.st.AddPoolBoot(ctx, store.PoolBoot{Template: tpl, Took: time.Duration(i+1) * time.Second}, 8); err != nil {
				return err
			}
		}
	}
	return nil
}
