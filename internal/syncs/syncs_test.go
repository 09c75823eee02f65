package syncs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/requestid"
)

func TestKeyedMutexSerialisesOneKeyOnly(t *testing.T) {
	var k KeyedMutex
	var inA atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := k.Lock("a")
			defer unlock()
			if n := inA.Add(1); n != 1 {
				t.Errorf("%d holders of key a at once", n)
			}
			time.Sleep(time.Millisecond)
			inA.Add(-1)
		}()
	}
	// Another key is not held up by a.
	unlockA := k.Lock("a")
	done := make(chan struct{})
	go func() { k.Lock("b")(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("key b waited for key a")
	}
	unlockA()
	wg.Wait()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.m) != 0 {
		t.Fatalf("entries left after every unlock: %v", k.m)
	}
}

func TestNotifierWakesTakenChannelsOfThatKey(t *testing.T) {
	var n Notifier
	a, b := n.Channel("a"), n.Channel("b")
	n.Broadcast("a")
	select {
	case <-a:
	default:
		t.Fatal("broadcast of a did not close a's channel")
	}
	select {
	case <-b:
		t.Fatal("broadcast of a closed b's channel")
	default:
	}
	if n.Channel("a") == a {
		t.Fatal("a channel taken after the broadcast is the closed one")
	}
	n.Broadcast("nobody-waits") // no channel: nothing to do
}

func TestWait(t *testing.T) {
	var n Notifier
	boom := errors.New("boom")
	tests := []struct {
		name     string
		timeout  time.Duration
		check    func(calls int) (bool, error)
		wakeUp   bool // broadcast once after the first check
		ctxEnds  bool
		wantDone bool
		wantErr  error
	}{
		{name: "done at once", timeout: time.Minute, check: func(int) (bool, error) { return true, nil }, wantDone: true},
		{name: "done after a wake-up", timeout: time.Minute, wakeUp: true, check: func(c int) (bool, error) { return c > 1, nil }, wantDone: true},
		{name: "check error ends it", timeout: time.Minute, check: func(int) (bool, error) { return false, boom }, wantErr: boom},
		{name: "timeout", timeout: 20 * time.Millisecond, check: func(int) (bool, error) { return false, nil }},
		{name: "ctx ends", timeout: time.Minute, ctxEnds: true, check: func(int) (bool, error) { return false, nil }, wantErr: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			calls := 0
			done, err := Wait(ctx, tc.timeout, time.Hour, func() <-chan struct{} { return n.Channel(tc.name) }, func() (bool, error) {
				calls++
				if calls == 1 {
					if tc.wakeUp {
						go n.Broadcast(tc.name)
					}
					if tc.ctxEnds {
						cancel()
					}
				}
				return tc.check(calls)
			})
			if done != tc.wantDone || !errors.Is(err, tc.wantErr) {
				t.Fatalf("Wait = %v, %v; want %v, %v", done, err, tc.wantDone, tc.wantErr)
			}
		})
	}
}

func TestLoopRunsAtOnceOnWakeAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	kick := make(chan struct{}, 1)
	runs := make(chan struct{}, 10)
	ended := make(chan struct{})
	go func() {
		Loop(ctx, time.Hour, func() <-chan struct{} { return kick }, func(context.Context) { runs <- struct{}{} })
		close(ended)
	}()
	<-runs // at once
	kick <- struct{}{}
	select {
	case <-runs:
	case <-time.After(5 * time.Second):
		t.Fatal("a wake-up did not run fn")
	}
	cancel()
	<-ended
}

func TestEveryWaitsOneIntervalFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var runs atomic.Int32
	ended := make(chan struct{})
	go func() {
		Every(ctx, time.Hour, func(context.Context) { runs.Add(1) })
		close(ended)
	}()
	cancel()
	<-ended
	if n := runs.Load(); n != 0 {
		t.Fatalf("Every ran %d times before its first interval", n)
	}
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	go Every(ctx2, time.Millisecond, func(context.Context) {
		if runs.Add(1) == 3 {
			cancel2()
		}
	})
	<-ctx2.Done()
}

func TestCancels(t *testing.T) {
	var c Cancels
	ctx, ended, ok := c.Start(context.Background(), "a")
	if !ok {
		t.Fatal("Start of a new key refused")
	}
	if _, _, ok := c.Start(context.Background(), "a"); ok {
		t.Fatal("second Start of a running key accepted")
	}
	bctx, _, ok := c.Start(context.Background(), "b")
	if !ok {
		t.Fatal("Start of another key refused")
	}
	c.Stop("a")
	if ctx.Err() == nil {
		t.Fatal("Stop did not cancel the task")
	}
	if bctx.Err() != nil {
		t.Fatal("Stop of a also cancelled b")
	}
	stale := ended
	ctx, _, ok = c.Start(context.Background(), "a")
	if !ok {
		t.Fatal("Start after Stop refused")
	}
	// A stopped task that ends after its key was started again leaves the
	// new task alone: Stop must still reach it.
	stale()
	if _, _, ok := c.Start(context.Background(), "a"); ok {
		t.Fatal("the end of a stopped task forgot the key's new task")
	}
	c.Stop("a")
	if ctx.Err() == nil {
		t.Fatal("Stop did not cancel the new task")
	}
	ctx, ended, ok = c.Start(context.Background(), "a")
	if !ok {
		t.Fatal("Start after Stop refused")
	}
	ended()
	if ctx.Err() == nil {
		t.Fatal("ended did not cancel the task")
	}
	if _, _, ok := c.Start(context.Background(), "a"); !ok {
		t.Fatal("Start after the task ended refused")
	}
}

// TestGroupCarriesRequestAndCloseWaits: work a request started names the
// request, outlives it, and Close cancels every goroutine's context (loops
// included) and returns only once they have all ended.
func TestGroupCarriesRequestAndCloseWaits(t *testing.T) {
	g := NewGroup()
	req, cancelReq := context.WithCancel(requestid.With(context.Background(), "req_1"))
	gotID := make(chan string, 1)
	var ended atomic.Int32
	g.GoFor(req, func(ctx context.Context) {
		gotID <- requestid.From(ctx)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // Close must wait for this
		ended.Add(1)
	})
	afterRan := make(chan struct{})
	g.Loop(context.Background(), time.Hour, true, nil, func(context.Context) {}, func() { ended.Add(1); close(afterRan) })
	if id := <-gotID; id != "req_1" {
		t.Fatalf("background work's request id %q, want req_1", id)
	}
	cancelReq() // the request ending does not end its work
	if g.Context().Err() != nil {
		t.Fatal("the group's context ended with a request's")
	}
	g.Close()
	if n := ended.Load(); n != 2 {
		t.Fatalf("Close returned with %d of 2 goroutines ended", n)
	}
	<-afterRan
	if g.Context().Err() == nil {
		t.Fatal("the group's context still live after Close")
	}
}

// TestInFlightCountsPerKeyAndEndsOnce: each Start counts one operation of
// its key only, and its end, called twice, takes one off.
func TestInFlightCountsPerKeyAndEndsOnce(t *testing.T) {
	var f InFlight[string]
	a1, a2 := f.Start("a"), f.Start("a")
	b := f.Start("b")
	if f.Count("a") != 2 || f.Count("b") != 1 || f.Count("c") != 0 {
		t.Fatalf("counts a %d b %d c %d, want 2 1 0", f.Count("a"), f.Count("b"), f.Count("c"))
	}
	a1()
	a1()
	if f.Count("a") != 1 {
		t.Fatalf("after one end called twice: a %d, want 1", f.Count("a"))
	}
	a2()
	b()
	if f.Count("a") != 0 || f.Count("b") != 0 || len(f.n) != 0 {
		t.Fatalf("after every end: a %d b %d, %d keys kept", f.Count("a"), f.Count("b"), len(f.n))
	}
}
