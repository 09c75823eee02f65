package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/ptdtest"
)

var (
	idemRuns = flag.Int("idempotency-runs", 50, "creates per variant in the idempotency bench (0 skips it)")
	idemOnly = flag.Bool("idempotency-only", false, "run only the idempotency bench")
)

// idemBench measures what an Idempotency-Key costs on the create API call
// (no wait: the record and the claim, not the boot): creates without a
// key (the baseline, same run), with a fresh key (claim + keep the
// answer), and retries of a used key (a replay from the store).
func idemBench(c *benchkit.Client, n int) error {
	if err := c.EnsureTemplate("busybox"); err != nil {
		return err
	}
	post := func(key string) (time.Duration, string, error) {
		req, _ := c.NewRequest(context.Background(), "POST", "/v1/sandboxes", bytes.NewReader([]byte(`{"template":"busybox","metadata":{"bench":"idempotency"}}`)))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		t0 := time.Now()
		st, b, err := benchkit.Send(req)
		if err != nil {
			return 0, "", err
		}
		d := time.Since(t0)
		if st != 201 {
			return 0, "", fmt.Errorf("create: %d %s", st, b)
		}
		var sb struct{ ID string }
		json.Unmarshal(b, &sb)
		return d, sb.ID, nil
	}
	var plain, keyed, replay []time.Duration
	var ids []string
	defer func() {
		for _, id := range ids {
			c.Delete(id)
		}
	}()
	for i := 0; i < n; i++ {
		d, id, err := post("")
		if err != nil {
			return err
		}
		plain, ids = append(plain, d), append(ids, id)
		key := "bench-" + ptdtest.RandHex(8)
		d, id, err = post(key)
		if err != nil {
			return err
		}
		keyed, ids = append(keyed, d), append(ids, id)
		d, again, err := post(key)
		if err != nil {
			return err
		}
		if again != id {
			return fmt.Errorf("replay answered %s, want %s", again, id)
		}
		replay = append(replay, d)
		// Keep the org under its quota: delete as we go.
		for _, id := range ids {
			c.Delete(id)
		}
		ids = ids[:0]
	}
	fmt.Println("Idempotency-Key on POST /v1/sandboxes (no wait), baseline: the same create without a key")
	benchkit.Report("create, no key (baseline)", plain, nil)
	benchkit.Report("create, fresh key", keyed, plain)
	benchkit.Report("retry of a used key (replay)", replay, plain)
	fmt.Println()
	return nil
}
