package agentclient

import (
	"testing"
	"time"
)

// TestReadyPoll: a quick boot is polled every 2 ms as before; a slow one
// less and less often, never more than 16 ms apart, so two seconds of
// waiting take a fraction of the polls a steady 2 ms took.
func TestReadyPoll(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct{ waited, want time.Duration }{
		{0, 2 * ms}, {31 * ms, 2 * ms}, {32 * ms, 2 * ms}, {64 * ms, 4 * ms},
		{160 * ms, 10 * ms}, {256 * ms, 16 * ms}, {time.Second, 16 * ms}, {time.Hour, 16 * ms},
	} {
		if got := readyPoll(tc.waited); got != tc.want {
			t.Errorf("readyPoll(%v) = %v, want %v", tc.waited, got, tc.want)
		}
	}
	polls := func(until time.Duration) (n int) {
		for w := time.Duration(0); w < until; w += readyPoll(w) {
			n++
		}
		return n
	}
	if n := polls(32 * ms); n != 16 {
		t.Errorf("%d polls in the first 32 ms, want 16 (every 2 ms)", n)
	}
	if n := polls(2 * time.Second); n > 200 {
		t.Errorf("%d polls in 2 s, want under 200 (a steady 2 ms made 1,000)", n)
	}
}
