package benchkit

import (
	"context"
	"fmt"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// SDKRun is one iteration's timings in milliseconds, named as the SDK
// runners print them (bench/sdk/runner.mjs).
type SDKRun struct {
	Total  float64 `json:"total_ms"`
	Create float64 `json:"create_ms"`
	Exec   float64 `json:"exec_ms"`
	Delete float64 `json:"delete_ms"`
}

// SDKIteration is one create (wait for running) → exec `true` → delete
// through the Go SDK, then an untimed wait for the teardown so runs never
// overlap. The SDK bench runs it in process as its baseline and in
// bench/sdk/gorunner as a runner of its own.
func SDKIteration(ctx context.Context, c *platinum.Client, tpl string) (SDKRun, error) {
	t0 := time.Now()
	sb, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: tpl}, platinum.WaitForRunning(0))
	if err != nil {
		return SDKRun{}, err
	}
	t1 := time.Now()
	res, err := c.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Cmd: []string{"true"}})
	if err != nil || res.ExitCode != 0 {
		return SDKRun{}, fmt.Errorf("exec true: %v %+v", err, res)
	}
	t2 := time.Now()
	if _, err := c.Sandboxes.Delete(ctx, sb.ID); err != nil {
		return SDKRun{}, err
	}
	t3 := time.Now()
	if _, err := c.Sandboxes.WaitForState(ctx, sb.ID, platinum.StateDeleted); err != nil {
		return SDKRun{}, err
	}
	return SDKRun{Total: Millis(t3.Sub(t0)), Create: Millis(t1.Sub(t0)), Exec: Millis(t2.Sub(t1)), Delete: Millis(t3.Sub(t2))}, nil
}

// Millis is d in milliseconds, as the runners' JSON carries durations.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
