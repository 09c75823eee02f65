package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/ptdtest"
)

var (
	sessionRuns  = flag.Int("session-runs", 30, "runs of the session bench: warm-path vs cold session create (0 skips it)")
	sessionsOnly = flag.Bool("sessions-only", false, "run only the session bench")
)

// sessionsBench measures, in one run against one ptd, POST /v1/sessions
// on the warm path (a pooled busybox sandbox is claimed: 200, ready) and
// on the cold path (202, provisioning), plus create → ready for both, so
// the warm path's latency is read against the cold one's.
func sessionsBench(c *benchkit.Client, runs int) error {
	const tpl = "busybox"
	if err := c.EnsureTemplate(tpl); err != nil {
		return err
	}
	type session struct {
		SessionID string `json:"session_id"`
		Status    string `json:"status"`
		Warm      bool   `json:"warm"`
	}
	create := func(want int) (session, time.Duration, error) {
		body := map[string]any{"vault_id": "bench", "workflow_id": "wf-" + ptdtest.RandHex(6), "template": tpl}
		t0 := time.Now()
		st, b, err := c.Do("POST", "/v1/sessions", body)
		d := time.Since(t0)
		var s session
		json.Unmarshal(b, &s)
		if err != nil || st != want {
			return s, d, fmt.Errorf("create session: %d (want %d) %s %v", st, want, b, err)
		}
		return s, d, nil
	}
	setPool := func(minReady, max int) error { return c.SetPool(tpl, "", minReady, max) }
	poolReady := func(n int) error { return c.WaitPool(tpl, "", n) }
	stop := func(id string) {
		c.Do("DELETE", "/v1/sessions/"+id+"?wait_timeout_ms=60000", nil)
	}
	exec := func(id string) error {
		st, b, err := c.Do("POST", "/v1/sessions/"+id+"/exec", map[string]any{"cmd": []string{"true"}})
		if err != nil || st != 200 {
			return fmt.Errorf("session exec: %d %s %v", st, b, err)
		}
		return nil
	}
	// measure runs runs sessions, each: before (untimed), a create that
	// answers want, ready (until the session is ready) and a first exec,
	// timed from the create; then the session ends (untimed).
	measure := func(want int, before func() error, ready func(*session) error) (api, toExec []time.Duration, err error) {
		for range runs {
			if err := before(); err != nil {
				return nil, nil, err
			}
			t0 := time.Now()
			s, d, err := create(want)
			if err != nil {
				return nil, nil, err
			}
			if err := ready(&s); err != nil {
				return nil, nil, err
			}
			if err := exec(s.SessionID); err != nil {
				return nil, nil, err
			}
			api, toExec = append(api, d), append(toExec, time.Since(t0))
			stop(s.SessionID)
		}
		return api, toExec, nil
	}

	// Cold: no pool; the API answers 202 and the session becomes ready
	// once its sandbox is provisioned.
	if err := setPool(0, 0); err != nil {
		return err
	}
	if err := poolReady(0); err != nil {
		return err
	}
	coldAPI, coldReady, err := measure(202, func() error { return nil }, func(s *session) error {
		st, b, err := c.Do("GET", "/v1/sessions/"+s.SessionID+"?wait_timeout_ms=120000", nil)
		if err != nil || st != 200 || json.Unmarshal(b, s) != nil || s.Status != "ready" {
			return fmt.Errorf("cold session never ready: %d %s %v", st, b, err)
		}
		return nil
	})
	if err != nil {
		return err
	}

	// Warm: a pool of 2; between runs (untimed) wait for a ready sandbox.
	if err := setPool(2, 2); err != nil {
		return err
	}
	warmAPI, warmReady, err := measure(200, func() error { return poolReady(1) }, func(s *session) error {
		if !s.Warm || s.Status != "ready" {
			return fmt.Errorf("warm create answered %+v", *s)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := setPool(0, 0); err != nil {
		return err
	}

	fmt.Println()
	benchkit.Report("session create, cold (202 answer)", coldAPI, nil)
	benchkit.Report("session create → first exec, cold", coldReady, nil)
	benchkit.Report("session create, warm (200 ready)", warmAPI, coldReady)
	benchkit.Report("session create → first exec, warm", warmReady, coldReady)
	return nil
}
