package controlplane

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/store"
)

// oomHost is a fake host that reports OOM kills and sandboxes that ended
// on their own, and records which sandboxes the control plane asked it to
// watch.
type oomHost struct {
	*fakeHost
	events  chan hostapi.OOMEvent
	exits   chan string
	mu      sync.Mutex
	watched []string
}

func (h *oomHost) Exits() <-chan string { return h.exits }

func (h *oomHost) WatchOOM(id, token string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watched = append(h.watched, id)
}

func (h *oomHost) OOMEvents() <-chan hostapi.OOMEvent { return h.events }

// TestOOMKillIsAnEvent: a sandbox that reaches running is watched for OOM
// kills, and each kill the host reports becomes an oom_killed event on the
// sandbox with its scope, count, source and the killed process; a report
// for a container no sandbox owns is dropped.
func TestOOMKillIsAnEvent(t *testing.T) {
	ctx := context.Background()
	h := &oomHost{fakeHost: &fakeHost{}, events: make(chan hostapi.OOMEvent, 4)}
	s, st := newServiceWith(t, h, "", nil)
	if err := s.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	sb := running(t, s, CreateRequest{Template: "busybox"})
	// The watch starts just after running is recorded, so the running the
	// test saw can come first: wait a moment for it.
	watched := false
	for end := time.Now().Add(5 * time.Second); !watched && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		h.mu.Lock()
		watched = slices.Contains(h.watched, sb.ID)
		h.mu.Unlock()
	}
	if !watched {
		t.Error("a running sandbox is not watched for OOM kills")
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h.events <- hostapi.OOMEvent{SandboxID: "sbx_nobody", Scope: hostapi.OOMScopeProcess, Count: 1, Source: "kernel", At: at}
	h.events <- hostapi.OOMEvent{SandboxID: sb.ID, Scope: hostapi.OOMScopeProcess, Count: 1, PID: 42, Command: "dd", RSSBytes: 300 << 20, Source: "guard", At: at}
	h.events <- hostapi.OOMEvent{SandboxID: sb.ID, Scope: hostapi.OOMScopeSandbox, Count: 1, Source: "kernel", At: at}
	var got []OOMKilledData
	for i := 0; i < 200 && len(got) < 2; i++ {
		evs, err := st.SandboxEvents(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, e := range evs {
			if e.Type != EventOOMKilled {
				continue
			}
			var d OOMKilledData
			if err := json.Unmarshal([]byte(e.Data), &d); err != nil {
				t.Fatalf("event data %q: %v", e.Data, err)
			}
			got = append(got, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := []OOMKilledData{
		{Scope: "process", Count: 1, PID: 42, Command: "dd", RSSBytes: 300 << 20, Source: "guard", At: "2026-01-02T03:04:05.000000Z"},
		{Scope: "sandbox", Count: 1, Source: "kernel", At: "2026-01-02T03:04:05.000000Z"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("oom_killed events %+v, want %+v", got, want)
	}
}

// TestSandboxEndedStartsAgainAtOnce: when the host reports that a sandbox
// ended, ended by it for memory or on its own, the sandbox boots again from
// its disk as soon as the host no longer runs it, without a reconciler
// pass, and the feed says its processes were lost and why; a report about
// a sandbox its host runs (booted again already) boots nothing.
func TestSandboxEndedStartsAgainAtOnce(t *testing.T) {
	tests := []struct {
		name   string
		report func(h *oomHost, id string)
		reason string
	}{
		{"for memory", func(h *oomHost, id string) {
			h.events <- hostapi.OOMEvent{SandboxID: id, Scope: hostapi.OOMScopeSandbox, Count: 1, Source: "kernel", At: time.Now()}
		}, reasonOOM},
		{"on its own", func(h *oomHost, id string) { h.exits <- id }, reasonEnded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var ended atomic.Bool
			var starts atomic.Int32
			h := &oomHost{fakeHost: &fakeHost{
				RunningFunc: func(string) bool { return !ended.Load() },
				StartFunc: func(context.Context, hostapi.StartSpec) (hostapi.Instance, error) {
					starts.Add(1)
					ended.Store(false)
					return hostapi.Instance{Address: "127.0.0.1"}, nil
				},
			}, events: make(chan hostapi.OOMEvent, 1), exits: make(chan string, 1)}
			s, st := newServiceWith(t, h, "", nil)
			if err := s.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			sb := running(t, s, CreateRequest{Template: "busybox"})
			booted := starts.Load()

			tc.report(h, sb.ID) // stale: the host runs it
			time.Sleep(time.Second)
			if starts.Load() != booted {
				t.Fatal("a report about a sandbox its host runs booted it again")
			}

			ended.Store(true)
			tc.report(h, sb.ID)
			for end := time.Now().Add(5 * time.Second); starts.Load() == booted && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
			}
			if starts.Load() == booted {
				t.Fatal("the sandbox was not booted again within 5 s")
			}
			var lost bool
			for i := 0; i < 100 && !lost; i++ {
				evs, err := st.SandboxEvents(ctx, sb.ID)
				if err != nil {
					t.Fatal(err)
				}
				lost = slices.ContainsFunc(evs, func(e store.Event) bool { return lostFor(e, tc.reason) })
				time.Sleep(10 * time.Millisecond)
			}
			if !lost {
				t.Errorf("no processes_lost event saying %q", tc.reason)
			}
		})
	}
}

// lostFor reports whether e is a processes_lost event that gives reason.
func lostFor(e store.Event, reason string) bool {
	var d struct{ Reason string }
	return e.Type == "processes_lost" && json.Unmarshal([]byte(e.Data), &d) == nil && d.Reason == reason
}
