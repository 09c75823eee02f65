package platinum

import (
	"context"
	"time"
)

// SetRetryClock makes c's retries call sleep instead of sleeping, take
// jitter as the random part of each wait, and read the time from now (nil:
// the real one), so tests see the waits without waiting them.
func SetRetryClock(c *Client, sleep func(ctx context.Context, d time.Duration) error, jitter func(upTo time.Duration) time.Duration, now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	c.retryClock = retryClock{sleep: sleep, jitter: jitter, now: now}
}
