package platinum_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// answer is one scripted server answer: a status and its Retry-After.
type answer struct {
	status     int
	retryAfter string
}

// retryServer answers each request with the next scripted answer (then
// 201s) and counts the requests.
type retryServer struct {
	mu      sync.Mutex
	answers []answer
	calls   int
}

func (s *retryServer) start(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.calls++
		a := answer{status: 201}
		if len(s.answers) > 0 {
			a, s.answers = s.answers[0], s.answers[1:]
		}
		s.mu.Unlock()
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		if a.status == 201 {
			io.WriteString(w, `{"id":"sbx_1","state":"creating"}`)
		} else {
			io.WriteString(w, `{"code":"capacity","error":"busy"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestSDKRetryWaits: a retried call waits the answer's Retry-After
// (delay-seconds or an HTTP date) plus a full-jitter exponential backoff
// (the random part is drawn from [0, 200 ms·2ⁿ), capped at 10 s), makes at
// most 1+WithRetries attempts, and never starts a wait that would end
// after the context's deadline (it returns the last answer at once).
func TestSDKRetryWaits(t *testing.T) {
	// The fake clock stands still at the real start, so a deadline counted
	// from it is still ahead for the real requests.
	now := time.Now().Truncate(time.Second)
	tests := []struct {
		name      string
		answers   []answer
		retries   int
		deadline  time.Duration // from now; 0: none
		wantCalls int
		wantErr   int // the APIError status the call ends with; 0: success
		// wantBounds are the jitter bounds asked for and wantWaits the
		// waits slept, in order (the jitter answers half its bound).
		wantBounds, wantWaits []time.Duration
	}{
		{name: "no Retry-After: exponential full jitter", answers: []answer{{503, ""}, {502, ""}}, retries: 2, wantCalls: 3,
			wantBounds: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}, wantWaits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}},
		{name: "Retry-After seconds is waited, jitter on top", answers: []answer{{503, "5"}}, retries: 2, wantCalls: 2,
			wantBounds: []time.Duration{200 * time.Millisecond}, wantWaits: []time.Duration{5*time.Second + 100*time.Millisecond}},
		{name: "Retry-After HTTP date", answers: []answer{{503, now.Add(3 * time.Second).Format(http.TimeFormat)}}, retries: 2, wantCalls: 2,
			wantBounds: []time.Duration{200 * time.Millisecond}, wantWaits: []time.Duration{3*time.Second + 100*time.Millisecond}},
		{name: "Retry-After date in the past: backoff only", answers: []answer{{503, now.Add(-time.Minute).Format(http.TimeFormat)}}, retries: 2, wantCalls: 2,
			wantBounds: []time.Duration{200 * time.Millisecond}, wantWaits: []time.Duration{100 * time.Millisecond}},
		{name: "malformed Retry-After: backoff only", answers: []answer{{503, "soon"}}, retries: 2, wantCalls: 2,
			wantBounds: []time.Duration{200 * time.Millisecond}, wantWaits: []time.Duration{100 * time.Millisecond}},
		{name: "attempts are bounded", answers: []answer{{503, ""}, {503, ""}, {503, ""}, {503, ""}}, retries: 2, wantCalls: 3, wantErr: 503,
			wantBounds: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}, wantWaits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}},
		{name: "backoff is capped at 10 s", answers: []answer{{503, ""}, {503, ""}, {503, ""}, {503, ""}, {503, ""}, {503, ""}, {503, ""}, {503, ""}},
			retries: 8, wantCalls: 9,
			wantBounds: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond,
				3200 * time.Millisecond, 6400 * time.Millisecond, 10 * time.Second, 10 * time.Second},
			wantWaits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
				1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}},
		{name: "Retry-After past the deadline: the answer at once", answers: []answer{{503, "5"}}, retries: 2, deadline: 4 * time.Second,
			wantCalls: 1, wantErr: 503, wantBounds: []time.Duration{200 * time.Millisecond}},
		{name: "backoff within the deadline is waited", answers: []answer{{503, "1"}}, retries: 2, deadline: 4 * time.Second,
			wantCalls: 2, wantBounds: []time.Duration{200 * time.Millisecond}, wantWaits: []time.Duration{1100 * time.Millisecond}},
		{name: "a Retry-After of an hour is the caller's", answers: []answer{{503, "3600"}}, retries: 2,
			wantCalls: 1, wantErr: 503, wantBounds: []time.Duration{200 * time.Millisecond}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := &retryServer{answers: tc.answers}
			c := platinum.New(srv.start(t), "t", platinum.WithRetries(tc.retries))
			var bounds, waits []time.Duration
			platinum.SetRetryClock(c,
				func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil },
				func(upTo time.Duration) time.Duration { bounds = append(bounds, upTo); return upTo / 2 },
				func() time.Time { return now })
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, now.Add(tc.deadline))
				defer cancel()
			}
			_, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"})
			var ae *platinum.APIError
			switch {
			case tc.wantErr == 0 && err != nil:
				t.Errorf("err = %v", err)
			case tc.wantErr != 0 && (!errors.As(err, &ae) || ae.StatusCode != tc.wantErr):
				t.Errorf("err = %v, want an APIError %d", err, tc.wantErr)
			}
			if srv.calls != tc.wantCalls {
				t.Errorf("%d requests, want %d", srv.calls, tc.wantCalls)
			}
			if !equalDurations(bounds, tc.wantBounds) || !equalDurations(waits, tc.wantWaits) {
				t.Errorf("jitter bounds %v, waits %v; want %v, %v", bounds, waits, tc.wantBounds, tc.wantWaits)
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSDKRetryRealWaitEndsWithContext: the real wait ends when the
// context is cancelled (no answer comes back after the caller gave up).
func TestSDKRetryRealWaitEndsWithContext(t *testing.T) {
	srv := &retryServer{answers: []answer{{503, "60"}}}
	c := platinum.New(srv.start(t), "t")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			srv.mu.Lock()
			n := srv.calls
			srv.mu.Unlock()
			if n > 0 {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if _, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if srv.calls != 1 {
		t.Errorf("%d requests after the cancel", srv.calls)
	}
}
