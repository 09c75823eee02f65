package platinum

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The waits between attempts of a retried call. Attempt n (from 0) is
// followed by a random wait in [0, min(retryCap, retryBase·2ⁿ)) — full
// jitter, so clients that failed together do not come back together — on
// top of the answer's Retry-After, which is never cut short. A wait that
// would end after the context's deadline is not started: the call returns
// the last answer at once, as the caller could do nothing with it later.
// A Retry-After longer than maxRetryAfter is handed to the caller too (as
// an *APIError with the answer) rather than slept through.
const (
	retryBase     = 200 * time.Millisecond
	retryCap      = 10 * time.Second
	maxRetryAfter = 2 * time.Minute
)

// retryClock is what the waits use: sleep and the jitter's random source.
// Tests replace it to record waits instead of sleeping them.
type retryClock struct {
	sleep  func(ctx context.Context, d time.Duration) error
	jitter func(upTo time.Duration) time.Duration // uniform in [0, upTo)
	now    func() time.Time
}

var defaultRetryClock = retryClock{sleep: sleep, jitter: fullJitter, now: time.Now}

func fullJitter(upTo time.Duration) time.Duration {
	if upTo <= 0 {
		return 0
	}
	return rand.N(upTo)
}

// backoff is the jitter's upper bound after attempt n.
func backoff(n int) time.Duration {
	if n >= 16 { // 200 ms · 2¹⁶ is far over the cap; no overflow
		return retryCap
	}
	return min(retryCap, retryBase<<n)
}

// retryAfter reads an answer's Retry-After: delay-seconds or an HTTP date
// (RFC 9110 §10.2.3). ok is false when it is absent or malformed.
func retryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, int64(maxRetryAfter/time.Second)+1)) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// doRetrying sends req, retrying a keyed mutating request (same key,
// body rewound) on answers that say "try again", at most c.retries times.
func (c *Client) doRetrying(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	canRetry := isMutating(req.Method) && req.Header.Get(IdempotencyKeyHeader) != "" && (req.Body == nil || req.GetBody != nil)
	clk := c.retryClock
	for attempt := 0; ; attempt++ {
		resp, err := c.httpClient.Do(req)
		if !canRetry || attempt >= c.retries || ctx.Err() != nil || !c.shouldRetry(resp, err) {
			return resp, err
		}
		wait := clk.jitter(backoff(attempt))
		if resp != nil {
			if ra, ok := retryAfter(resp.Header, clk.now()); ok {
				if ra > maxRetryAfter {
					return resp, err // the server asks for longer than a call should block
				}
				wait += ra
			}
		}
		if dl, ok := ctx.Deadline(); ok && clk.now().Add(wait).After(dl) {
			return resp, err // the retry could not be sent in time: the answer we have
		}
		if resp != nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
		}
		if err := clk.sleep(ctx, wait); err != nil {
			return nil, err
		}
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req.Body = body
		}
	}
}
