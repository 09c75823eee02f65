package events

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
	"github.com/platinum-dev/platinum/internal/tenancy"
	"github.com/platinum-dev/platinum/internal/webhook"
)

var org = tenancy.Principal{OrgID: "org_a", Role: store.RoleAdmin}

// newTestService opens a SQLite store (in a fresh temp dir) wrapped by a
// feed, and the service over it with a 20 ms poll. Both close at the
// test's cleanup.
func newTestService(t *testing.T) (*Service, store.Store) {
	t.Helper()
	return openService(t, filepath.Join(t.TempDir(), "db"), func(*Config) {})
}

// openService is newTestService over the store at path, with tune's
// changes to the config.
func openService(t *testing.T, path string, tune func(*Config)) (*Service, store.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.PollInterval = 20 * time.Millisecond
	tune(&cfg)
	feed := &Feed{}
	s := New(cfg, feed.Wrap(st), feed, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { s.Close(); st.Close() })
	return s, st
}

func eventTypes(evs []Event) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func TestEventsFiltersAndOrgs(t *testing.T) {
	s, _ := newTestService(t)
	ctx := context.Background()
	other := tenancy.Principal{OrgID: "org_b", Role: store.RoleAdmin}
	add := func(orgID, sbx, typ string, data any) {
		t.Helper()
		if err := s.store.AddEvent(ctx, orgID, sbx, typ, data); err != nil {
			t.Fatal(err)
		}
	}
	add("org_a", "sbx_1", "state_changed", map[string]string{"from": "creating", "to": "running"})
	add("org_b", "sbx_2", "state_changed", map[string]string{"from": "creating", "to": "running"})
	add("org_a", "", "session_status_changed", map[string]string{"session_id": "ses_1", "workflow_id": "wf_1", "vault_id": "v1", "status": "ready"})
	add("org_a", "", "session_status_changed", map[string]string{"session_id": "ses_2", "workflow_id": "wf_2", "vault_id": "v1", "status": "ready"})
	add("org_a", "sbx_1", "start_ram_not_restored", nil)

	tests := []struct {
		name string
		p    tenancy.Principal
		f    EventFilter
		want []string
	}{
		{"all of org a", org, EventFilter{}, []string{"state_changed", "session_status_changed", "session_status_changed", "start_ram_not_restored"}},
		{"org b sees only its own", other, EventFilter{}, []string{"state_changed"}},
		{"by sandbox", org, EventFilter{SandboxID: "sbx_1"}, []string{"state_changed", "start_ram_not_restored"}},
		{"another org's sandbox", org, EventFilter{SandboxID: "sbx_2"}, []string{}},
		{"by type", org, EventFilter{Types: []string{"session_status_changed"}}, []string{"session_status_changed", "session_status_changed"}},
		{"by workflow", org, EventFilter{WorkflowID: "wf_2"}, []string{"session_status_changed"}},
		{"by session and vault", org, EventFilter{SessionID: "ses_1", VaultID: "v1"}, []string{"session_status_changed"}},
		{"context mismatch", org, EventFilter{SessionID: "ses_1", VaultID: "v2"}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evs, _, err := s.Events(ctx, tc.p, tc.f, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, eventTypes(evs)); diff != "" {
				t.Errorf("types (-want +got):\n%s", diff)
			}
			for _, e := range evs {
				if e.OrgID != tc.p.OrgID {
					t.Errorf("event %d of org %s in %s's feed", e.ID, e.OrgID, tc.p.OrgID)
				}
			}
		})
	}

	// The cursor resumes after what was read, even past filtered rows.
	evs, next, err := s.Events(ctx, org, EventFilter{}, 0, 2)
	if err != nil || len(evs) != 2 {
		t.Fatalf("page = %v, %v", evs, err)
	}
	rest, _, err := s.Events(ctx, org, EventFilter{}, next, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"session_status_changed", "start_ram_not_restored"}, eventTypes(rest)); diff != "" {
		t.Errorf("after cursor (-want +got):\n%s", diff)
	}

	if _, _, err := s.Events(ctx, tenancy.Principal{OrgID: "org_a", SandboxID: "sbx_1"}, EventFilter{}, 0, 0); !errors.Is(err, sandbox.ErrForbidden) {
		t.Errorf("sandbox token: err = %v, want forbidden", err)
	}
}

// TestWaitEventsWakesOnCommit checks that a waiter returns the event a
// later write commits (the wait itself is long: only the wake ends it).
func TestWaitEventsWakesOnCommit(t *testing.T) {
	s, _ := newTestService(t)
	s.cfg.PollInterval = time.Hour // only the feed can wake the waiter
	ctx := context.Background()
	got := make(chan []Event, 1)
	go func() {
		evs, _, err := s.WaitEvents(ctx, org, EventFilter{}, 0, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- evs
	}()
	time.Sleep(50 * time.Millisecond)
	if err := s.store.AddEvent(ctx, "org_a", "sbx_1", "hello", nil); err != nil {
		t.Fatal(err)
	}
	evs := <-got
	if diff := cmp.Diff([]string{"hello"}, eventTypes(evs)); diff != "" {
		t.Errorf("woken with (-want +got):\n%s", diff)
	}
}

func TestWebhookValidation(t *testing.T) {
	s, _ := newTestService(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		req   WebhookRequest
		field string
	}{
		{"no url", WebhookRequest{}, "url"},
		{"ftp", WebhookRequest{URL: "ftp://example.com/x"}, "url"},
		{"loopback refused", WebhookRequest{URL: "http://127.0.0.1:9/x"}, "url"},
		{"localhost refused", WebhookRequest{URL: "http://localhost:9/x"}, "url"},
		{"metadata refused", WebhookRequest{URL: "http://169.254.169.254/latest"}, "url"},
		{"credentials", WebhookRequest{URL: "https://u:p@example.com/x"}, "url"},
		{"short secret", WebhookRequest{URL: "https://example.com/x", Secret: "short"}, "secret"},
		{"empty type", WebhookRequest{URL: "https://example.com/x", Events: []string{""}}, "events"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.CreateWebhook(ctx, org, tc.req)
			fe, ok := err.(*sandbox.FieldError)
			if !ok || fe.Field != tc.field {
				t.Fatalf("err = %v, want a FieldError on %q", err, tc.field)
			}
		})
	}
	if ws, _ := s.ListWebhooks(ctx, org); len(ws) != 0 {
		t.Errorf("refused creates stored %d webhooks", len(ws))
	}
}

// receiver is a webhook endpoint that fails its first `fail` requests.
type receiver struct {
	mu     sync.Mutex
	fail   int
	bodies [][]byte
	sigs   []string
	at     []time.Time // when each request arrived
	got    chan struct{}
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, b)
	r.sigs = append(r.sigs, req.Header.Get(webhook.SignatureHeader))
	r.at = append(r.at, time.Now())
	if len(r.bodies) <= r.fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
	select {
	case r.got <- struct{}{}:
	default:
	}
}

// pollDeliveries reads webhook whID's deliveries every 10 ms until there
// is exactly one and done accepts it, or within runs out, and returns the
// last read: delivery runs on the service's own goroutines.
func pollDeliveries(ctx context.Context, s *Service, whID string, within time.Duration, done func(store.Delivery) bool) []store.Delivery {
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		ds, _ := s.WebhookDeliveries(ctx, org, whID, 0)
		if (len(ds) == 1 && done(ds[0])) || time.Now().After(deadline) {
			return ds
		}
	}
}

func TestWebhookDeliveryRetriesAndSigns(t *testing.T) {
	s, _ := newTestService(t)
	s.cfg.AllowPrivate = true
	s.cfg.RetryBase = 10 * time.Millisecond
	rcv := &receiver{fail: 2, got: make(chan struct{}, 1)}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	ctx := context.Background()

	wh, err := s.CreateWebhook(ctx, org, WebhookRequest{URL: srv.URL + "/hook", Events: []string{"hello"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(wh.Secret, "whsec_") {
		t.Fatalf("generated secret %q", wh.Secret)
	}
	if got, _ := s.GetWebhook(ctx, org, wh.ID); got.Secret != "" {
		t.Error("GetWebhook shows the secret")
	}
	if _, err := s.GetWebhook(ctx, tenancy.Principal{OrgID: "org_b"}, wh.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("other org: %v, want not found", err)
	}
	s.Run(ctx)
	s.store.AddEvent(ctx, "org_a", "sbx_1", "other", nil) // not subscribed
	s.store.AddEvent(ctx, "org_b", "sbx_2", "hello", nil) // another org
	s.store.AddEvent(ctx, "org_a", "sbx_1", "hello", map[string]string{"k": "v"})
	select {
	case <-rcv.got:
	case <-time.After(30 * time.Second):
		t.Fatal("no successful delivery")
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.bodies) != 3 {
		t.Fatalf("%d requests, want 3 (two failures, one success)", len(rcv.bodies))
	}
	for i, b := range rcv.bodies {
		var e Event
		if err := json.Unmarshal(b, &e); err != nil || e.Type != "hello" || e.OrgID != "org_a" || string(e.Data) != `{"k":"v"}` {
			t.Errorf("body %d = %s (%v)", i, b, err)
		}
		ts := strings.TrimPrefix(strings.Split(rcv.sigs[i], ",")[0], "t=")
		sec, _ := strconv.ParseInt(ts, 10, 64)
		if want := webhook.Sign(wh.Secret, time.Unix(sec, 0), b); rcv.sigs[i] != want {
			t.Errorf("signature %d = %q, want %q", i, rcv.sigs[i], want)
		}
	}
	ds := pollDeliveries(ctx, s, wh.ID, 10*time.Second, func(d store.Delivery) bool { return d.Status == store.DeliveryDelivered })
	if len(ds) != 1 || ds[0].Status != store.DeliveryDelivered || ds[0].Attempts != 3 || ds[0].LastStatus != 204 {
		t.Errorf("deliveries = %+v", ds)
	}
}

func TestWebhookGivesUpAfterMaxAttempts(t *testing.T) {
	s, _ := newTestService(t)
	s.cfg.AllowPrivate = true
	s.cfg.RetryBase = time.Millisecond
	s.cfg.MaxAttempts = 3
	rcv := &receiver{fail: 1000, got: make(chan struct{}, 1)}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	ctx := context.Background()
	wh, err := s.CreateWebhook(ctx, org, WebhookRequest{URL: srv.URL, Secret: strings.Repeat("s", 32)})
	if err != nil {
		t.Fatal(err)
	}
	s.Run(ctx)
	s.store.AddEvent(ctx, "org_a", "sbx_1", "hello", nil)
	ds := pollDeliveries(ctx, s, wh.ID, 20*time.Second, func(d store.Delivery) bool { return d.Status == store.DeliveryFailed })
	if len(ds) != 1 || ds[0].Status != store.DeliveryFailed || ds[0].Attempts != 3 || ds[0].LastStatus != 503 {
		t.Fatalf("deliveries = %+v", ds)
	}
	rcv.mu.Lock()
	n := len(rcv.bodies)
	rcv.mu.Unlock()
	if n != 3 {
		t.Errorf("receiver got %d requests, want 3", n)
	}
}

func TestWebhookBackoff(t *testing.T) {
	c := Config{RetryBase: time.Second, RetryMax: 10 * time.Second}
	var got []time.Duration
	for i := 1; i <= 6; i++ {
		got = append(got, c.backoff(i))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoff (-want +got):\n%s", diff)
	}
}

// TestWebhookDeliveryResumesAfterRestart checks that a delivery that
// failed before the service stopped is sent by the next service on the
// same store (the delivery and its backoff live in the store).
func TestWebhookDeliveryResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	// The first process retries only after a few seconds, so the test sees
	// the failed first attempt before any retry; the second retries at once.
	open := func(retryBase time.Duration) (*Service, store.Store) {
		st, err := sqlite.Open(context.Background(), filepath.Join(dir, "db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.PollInterval = 20 * time.Millisecond
		cfg.AllowPrivate, cfg.RetryBase = true, retryBase
		feed := &Feed{}
		return New(cfg, feed.Wrap(st), feed, slog.New(slog.NewTextHandler(io.Discard, nil))), st
	}
	ctx := context.Background()
	rcv := &receiver{fail: 1, got: make(chan struct{}, 1)}
	srv := httptest.NewServer(rcv)
	defer srv.Close()

	s1, st1 := open(3 * time.Second)
	wh, err := s1.CreateWebhook(ctx, org, WebhookRequest{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	s1.Run(ctx)
	s1.store.AddEvent(ctx, "org_a", "sbx_1", "hello", nil)
	if ds := pollDeliveries(ctx, s1, wh.ID, 10*time.Second, func(d store.Delivery) bool { return d.Attempts == 1 }); len(ds) != 1 || ds[0].Attempts != 1 {
		t.Fatalf("first attempt never recorded: %+v", ds)
	}
	s1.Close()
	st1.Close()

	s2, st2 := open(10 * time.Millisecond)
	defer func() { s2.Close(); st2.Close() }()
	s2.Run(ctx)
	select {
	case <-rcv.got:
	case <-time.After(30 * time.Second):
		t.Fatal("the pending delivery was not sent after the restart")
	}
	delivered := func(d store.Delivery) bool { return d.Status == store.DeliveryDelivered && d.Attempts == 2 }
	if ds := pollDeliveries(ctx, s2, wh.ID, 10*time.Second, delivered); len(ds) != 1 || !delivered(ds[0]) {
		t.Fatalf("deliveries after restart: %+v", ds)
	}
}
