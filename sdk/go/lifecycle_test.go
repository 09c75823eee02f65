package platinum_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/hostapi"
	platinum "github.com/platinum-dev/platinum/sdk/go"
	"github.com/platinum-dev/platinum/sdk/go/platinumtest"
)

// lifecycleCalls are the calls under test, by name.
var lifecycleCalls = map[string]func(*platinum.SandboxesService, context.Context, string, ...platinum.LifecycleOption) (*platinum.Sandbox, error){
	"stop":    (*platinum.SandboxesService).Stop,
	"pause":   (*platinum.SandboxesService).Pause,
	"start":   (*platinum.SandboxesService).Start,
	"resume":  (*platinum.SandboxesService).Resume,
	"archive": (*platinum.SandboxesService).Archive,
}

// gets reports whether the client read the sandbox back (polled).
func gets(reqs []string, id string) bool {
	return slices.ContainsFunc(reqs, func(r string) bool { return strings.HasPrefix(r, "GET /v1/sandboxes/"+id) })
}

// slowStop is a host stop that takes d, then fails with err when it is
// not nil.
func slowStop(d time.Duration, err error) func(context.Context, string, bool) error {
	return func(ctx context.Context, _ string, _ bool) error {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
		return err
	}
}

// coldStart is a host start that boots from disk: nothing in memory
// survives.
func coldStart(ctx context.Context, _ hostapi.StartSpec) (hostapi.Instance, error) {
	return hostapi.Instance{}, nil
}

func TestLifecycle(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*platinumtest.Server)
		state string // the sandbox's state before the call
		typ   string
		call  string
		opts  []platinum.LifecycleOption

		wantPost    string // after /v1/sandboxes/ID/
		wantState   platinum.State
		wantPolled  bool
		wantRestore platinum.RestoreKind // "" means absent
		thenState   platinum.State       // where the sandbox goes next by itself
		orStates    []platinum.State     // other answers as good as wantState
		wantErr     func(error) bool
	}{
		{name: "stop without a wait answers stopping", state: "running", call: "stop",
			wantPost: "stop", wantState: platinum.StateStopping},
		{name: "stop waits on the server", state: "running", call: "stop",
			opts:     []platinum.LifecycleOption{platinum.WaitForStopped(30 * time.Second)},
			wantPost: "stop?wait_for_state=stopped&wait_timeout_ms=30000", wantState: platinum.StateStopped},
		{name: "stop 202 then polls", setup: func(s *platinumtest.Server) { s.Host.StopFunc = slowStop(1500*time.Millisecond, nil) }, state: "running", call: "stop",
			opts:     []platinum.LifecycleOption{platinum.WaitForStopped(time.Second)},
			wantPost: "stop?wait_for_state=stopped&wait_timeout_ms=1000", wantState: platinum.StateStopped, wantPolled: true},
		{name: "pause is stop", state: "running", call: "pause",
			opts:     []platinum.LifecycleOption{platinum.WaitForStopped(0)},
			wantPost: "pause?wait_for_state=stopped", wantState: platinum.StateStopped},
		{name: "stop of a stopped sandbox is a no-op", state: "stopped", call: "stop",
			opts:     []platinum.LifecycleOption{platinum.WaitForStopped(0)},
			wantPost: "stop?wait_for_state=stopped", wantState: platinum.StateStopped},
		{name: "stop of an archived sandbox counts as stopped", state: "archived", call: "stop",
			opts:     []platinum.LifecycleOption{platinum.WaitForStopped(0)},
			wantPost: "stop?wait_for_state=stopped", wantState: platinum.StateArchived},
		{name: "ephemeral sandbox is deleted when it stops", state: "running", typ: "ephemeral", call: "stop",
			opts:     []platinum.LifecycleOption{platinum.WaitForStopped(0)},
			wantPost: "stop?wait_for_state=stopped", wantState: platinum.StateStopped, thenState: platinum.StateDeleted,
			// The delete follows the stop at once: the answer may show it.
			orStates: []platinum.State{platinum.StateDeleting, platinum.StateDeleted}},
		{name: "start brings memory back", state: "stopped", call: "start",
			opts:     []platinum.LifecycleOption{platinum.WaitForRunning(time.Minute)},
			wantPost: "start?wait_for_state=running&wait_timeout_ms=60000", wantState: platinum.StateRunning, wantRestore: platinum.RestoreMemory},
		{name: "start from disk only", setup: func(s *platinumtest.Server) { s.Host.StartFunc = coldStart }, state: "stopped", call: "start",
			opts:     []platinum.LifecycleOption{platinum.WaitForRunning(time.Minute)},
			wantPost: "start?wait_for_state=running&wait_timeout_ms=60000", wantState: platinum.StateRunning, wantRestore: platinum.RestoreDiskOnly},
		{name: "start without a wait answers starting", state: "stopped", call: "start",
			wantPost: "start", wantState: platinum.StateStarting},
		{name: "resume restores an archived sandbox", state: "archived", call: "resume",
			opts:     []platinum.LifecycleOption{platinum.WaitForRunning(0)},
			wantPost: "resume?wait_for_state=running", wantState: platinum.StateRunning, wantRestore: platinum.RestoreDiskOnly},
		{name: "start of a running sandbox is a no-op", state: "running", call: "start",
			opts:     []platinum.LifecycleOption{platinum.WaitForRunning(0)},
			wantPost: "start?wait_for_state=running", wantState: platinum.StateRunning},
		{name: "archive waits", state: "stopped", call: "archive",
			opts:     []platinum.LifecycleOption{platinum.WaitForArchived(time.Minute)},
			wantPost: "archive?wait_for_state=archived&wait_timeout_ms=60000", wantState: platinum.StateArchived},
		{name: "archive without a wait answers archiving", state: "stopped", call: "archive",
			wantPost: "archive", wantState: platinum.StateArchiving},
		{name: "archive of an archived sandbox is a conflict", state: "archived", call: "archive",
			opts:     []platinum.LifecycleOption{platinum.WaitForArchived(0)},
			wantPost: "archive?wait_for_state=archived",
			wantErr: func(err error) bool {
				var ae *platinum.APIError
				return errors.As(err, &ae) && ae.StatusCode == 409 && ae.Code == platinum.CodeConflict && ae.State() == platinum.StateArchived
			}},
		{name: "failed stop is a StateError", setup: func(s *platinumtest.Server) { s.Host.StopFunc = slowStop(0, errors.New("host gone")) }, state: "running", call: "stop",
			opts:     []platinum.LifecycleOption{platinum.WaitForStopped(0)},
			wantPost: "stop?wait_for_state=stopped", wantState: platinum.StateFailed,
			wantErr: func(err error) bool {
				var se *platinum.StateError
				return errors.As(err, &se) && se.Got == platinum.StateFailed && se.Want == platinum.StateStopped && strings.Contains(se.Reason, "host gone")
			}},
		{name: "failed at once is a StateError without polling", setup: func(s *platinumtest.Server) { s.Host.StartFunc = slowStart(0, errors.New("no capacity")) }, state: "stopped", call: "start",
			opts:     []platinum.LifecycleOption{platinum.WaitForRunning(0)},
			wantPost: "start?wait_for_state=running", wantState: platinum.StateFailed,
			wantErr: func(err error) bool {
				var se *platinum.StateError
				return errors.As(err, &se) && se.Got == platinum.StateFailed && strings.Contains(se.Reason, "no capacity")
			}},
		{name: "failed archive is a StateError", setup: func(s *platinumtest.Server) {
			s.Host.DiskImageFile = filepath.Join(os.TempDir(), "no-such-disk.img") // the archive cannot read the disk
		}, state: "stopped", call: "archive",
			// ptd's own wait runs to its end when an archive fails back to
			// stopped; the client then sees why.
			opts:     []platinum.LifecycleOption{platinum.WaitForArchived(time.Second)},
			wantPost: "archive?wait_for_state=archived&wait_timeout_ms=1000", wantState: platinum.StateStopped,
			wantErr: func(err error) bool {
				var se *platinum.StateError
				return errors.As(err, &se) && se.Got == platinum.StateStopped && se.Want == platinum.StateArchived && strings.Contains(err.Error(), "archive failed")
			}},
		{name: "archive of a running sandbox is a conflict", state: "running", call: "archive",
			wantPost: "archive",
			wantErr: func(err error) bool {
				var ae *platinum.APIError
				return errors.As(err, &ae) && ae.StatusCode == 409 && ae.Code == platinum.CodeConflict && ae.State() == platinum.StateRunning
			}},
		{name: "stop of a creating sandbox is a conflict", state: "creating", call: "stop",
			opts:     []platinum.LifecycleOption{platinum.WaitForStopped(0)},
			wantPost: "stop?wait_for_state=stopped",
			wantErr: func(err error) bool {
				return platinum.IsCode(err, platinum.CodeConflict) && strings.Contains(err.Error(), "stop sandbox ")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := newServer(t)
			var id string
			if tt.state == "creating" {
				srv.Host.StartFunc = slowStart(time.Hour, nil)
				sb, err := c.Sandboxes.Create(t.Context(), platinum.CreateSandboxRequest{Template: "busybox"})
				if err != nil {
					t.Fatal(err)
				}
				id = sb.ID
			} else {
				id = inState(t, c, platinum.CreateSandboxRequest{Type: platinum.SandboxType(tt.typ)}, platinum.State(tt.state))
			}
			if tt.setup != nil {
				tt.setup(srv)
			}
			before := len(srv.Requests())
			sb, err := lifecycleCalls[tt.call](c.Sandboxes, t.Context(), id, tt.opts...)
			reqs := srv.Requests()[before:]
			if want := "POST /v1/sandboxes/" + id + "/" + tt.wantPost; len(reqs) == 0 || reqs[0] != want {
				t.Errorf("requests = %q, want %q first", reqs, want)
			}
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("err = %v (%T), not the one wanted", err, err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if tt.wantState == "" {
				if sb != nil {
					t.Errorf("sandbox = %+v on an API error, want nil", sb)
				}
				return
			}
			if sb == nil || sb.ID != id || sb.State != tt.wantState && !slices.Contains(tt.orStates, sb.State) {
				t.Fatalf("sandbox = %+v, want %s in state %s", sb, id, tt.wantState)
			}
			if got := gets(reqs, id); got != tt.wantPolled {
				t.Errorf("polled = %v, want %v (requests %q)", got, tt.wantPolled, reqs)
			}
			if tt.thenState != "" {
				if sb, err := c.Sandboxes.WaitForState(t.Context(), id, tt.thenState); err != nil {
					t.Errorf("then: %+v, %v; want %s", sb, err, tt.thenState)
				}
			}
			if tt.wantRestore == "" {
				if sb.Restore != nil || sb.RAMRestored != nil {
					t.Errorf("restore = %v, ram_restored = %v; want both absent", sb.Restore, sb.RAMRestored)
				}
				return
			}
			if sb.Restore == nil || *sb.Restore != tt.wantRestore || sb.RAMRestored == nil || *sb.RAMRestored != (tt.wantRestore == platinum.RestoreMemory) {
				t.Errorf("restore = %v, ram_restored = %v; want %s", sb.Restore, sb.RAMRestored, tt.wantRestore)
			}
			ls, err := sb.LastStart()
			if err != nil || ls == nil || ls.Restore != tt.wantRestore || ls.RAMRestored != (tt.wantRestore == platinum.RestoreMemory) || ls.At.IsZero() {
				t.Errorf("LastStart = %+v, %v", ls, err)
			}
		})
	}
}

// TestLifecycleKeepsLastStart checks a stop drops restore/ram_restored
// (they describe a running sandbox) but metadata.last_start survives.
func TestLifecycleKeepsLastStart(t *testing.T) {
	srv, c := newServer(t)
	id := inState(t, c, platinum.CreateSandboxRequest{Metadata: map[string]string{"team": "x"}}, platinum.StateStopped)
	srv.Host.StartFunc = coldStart
	ctx := t.Context()
	if _, err := c.Sandboxes.Start(ctx, id, platinum.WaitForRunning(0)); err != nil {
		t.Fatal(err)
	}
	sb, err := c.Sandboxes.Stop(ctx, id, platinum.WaitForStopped(0))
	if err != nil || sb.State != platinum.StateStopped {
		t.Fatalf("Stop = %+v, %v", sb, err)
	}
	if sb.Restore != nil || sb.RAMRestored != nil {
		t.Errorf("stopped sandbox has restore %v, ram_restored %v", sb.Restore, sb.RAMRestored)
	}
	ls, err := sb.LastStart()
	if err != nil || ls == nil || ls.Restore != platinum.RestoreDiskOnly || ls.RAMRestored {
		t.Errorf("LastStart = %+v, %v; want disk_only", ls, err)
	}
	if sb.Metadata["team"] != "x" {
		t.Errorf("metadata = %v, lost the user's keys", sb.Metadata)
	}
	none, err := (&platinum.Sandbox{}).LastStart()
	if none != nil || err != nil {
		t.Errorf("LastStart of a never-started sandbox = %+v, %v; want nil, nil", none, err)
	}
	if _, err := (&platinum.Sandbox{Metadata: map[string]string{"last_start": "{"}}).LastStart(); err == nil {
		t.Error("LastStart of malformed metadata: no error")
	}
}

// TestLifecycleOnStateChange checks progress callbacks see each state once
// and that they make the call poll instead of waiting on the server.
func TestLifecycleOnStateChange(t *testing.T) {
	srv, c := newServer(t)
	id := inState(t, c, platinum.CreateSandboxRequest{}, platinum.StateStopped)
	before := len(srv.Requests())
	var seen []platinum.State
	sb, err := c.Sandboxes.Archive(t.Context(), id, platinum.WaitForArchived(time.Minute),
		platinum.OnStateChange(func(sb *platinum.Sandbox) { seen = append(seen, sb.State) }))
	if err != nil || sb.State != platinum.StateArchived {
		t.Fatalf("Archive = %+v, %v", sb, err)
	}
	// Progress of the archive calls fn again in the same state.
	if want := []platinum.State{platinum.StateArchiving, platinum.StateArchived}; !slices.Equal(slices.Compact(seen), want) {
		t.Errorf("states seen = %q, want %q", seen, want)
	}
	if reqs := srv.Requests()[before:]; reqs[0] != "POST /v1/sandboxes/"+id+"/archive" || !gets(reqs, id) {
		t.Errorf("requests = %q, want a POST without a server wait, then polls", reqs)
	}

	// Without a wait the callback sees the answer only.
	seen = nil
	if _, err := c.Sandboxes.Start(t.Context(), id, platinum.OnStateChange(func(sb *platinum.Sandbox) { seen = append(seen, sb.State) })); err != nil {
		t.Fatal(err)
	}
	if want := []platinum.State{platinum.StateRestoring}; !slices.Equal(seen, want) {
		t.Errorf("states seen = %q, want %q", seen, want)
	}
}

func TestLifecycleWaitEndsWithContext(t *testing.T) {
	srv, c, id := withSandbox(t)
	srv.Host.StopFunc = slowStop(time.Hour, nil)
	before := len(srv.Requests())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(srv.Requests()) < before+4 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	defer func() { cancel(); <-done }()
	sb, err := c.Sandboxes.Stop(ctx, id, platinum.WaitForStopped(time.Second))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if sb == nil || sb.ID != id || sb.State != platinum.StateStopping {
		t.Fatalf("sandbox = %+v, want the stopping sandbox as last seen", sb)
	}
}

// TestWaitForTheWrongState checks a wait for a state the call does not
// lead to fails before anything is sent.
func TestWaitForTheWrongState(t *testing.T) {
	srv, c, id := withSandbox(t)
	before := len(srv.Requests())
	ctx := t.Context()
	calls := map[string]func() error{
		"stop waiting for running": func() error {
			_, err := c.Sandboxes.Stop(ctx, id, platinum.WaitForRunning(0))
			return err
		},
		"start waiting for archived": func() error {
			_, err := c.Sandboxes.Start(ctx, id, platinum.WaitForArchived(0))
			return err
		},
		"archive waiting for stopped": func() error {
			_, err := c.Sandboxes.Archive(ctx, id, platinum.WaitForStopped(0))
			return err
		},
		"create waiting for stopped": func() error {
			_, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"}, platinum.WaitForStopped(0))
			return err
		},
	}
	for name, call := range calls {
		if err := call(); err == nil || !strings.Contains(err.Error(), "wait for") {
			t.Errorf("%s: err = %v, want a refusal", name, err)
		}
	}
	if reqs := srv.Requests()[before:]; len(reqs) != 0 {
		t.Errorf("requests = %q, want none", reqs)
	}
}

func TestCreateRetention(t *testing.T) {
	tests := []struct {
		name                  string
		req                   platinum.CreateSandboxRequest
		wantType              platinum.SandboxType
		wantStop, wantArchive int
		wantDelete            int
		wantErrField          string
	}{
		{"persistent by default", platinum.CreateSandboxRequest{Template: "busybox"}, platinum.TypePersistent, 60, 7, 0, ""},
		{"ephemeral", platinum.CreateSandboxRequest{Template: "busybox", Type: platinum.TypeEphemeral}, platinum.TypeEphemeral, 15, 0, 0, ""},
		{"dev with overrides; 0 disables", platinum.CreateSandboxRequest{Template: "busybox", Type: platinum.TypeDev, AutoStopMinutes: new(0), AutoDeleteDays: new(90)},
			platinum.TypeDev, 0, 30, 90, ""},
		{"unknown type", platinum.CreateSandboxRequest{Template: "busybox", Type: "forever"}, "", 0, 0, 0, "type"},
		{"negative timer", platinum.CreateSandboxRequest{Template: "busybox", AutoArchiveDays: new(-1)}, "", 0, 0, 0, "auto_archive_days"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := newServer(t)
			sb, err := c.Sandboxes.Create(t.Context(), tt.req)
			if tt.wantErrField != "" {
				var ae *platinum.APIError
				if !errors.As(err, &ae) || ae.Code != platinum.CodeInvalidRequest || ae.Field() != tt.wantErrField {
					t.Fatalf("err = %v, want invalid_request on %s", err, tt.wantErrField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []any{sb.Type, sb.AutoStopMinutes, sb.AutoArchiveDays, sb.AutoDeleteDays}
			if want := []any{tt.wantType, tt.wantStop, tt.wantArchive, tt.wantDelete}; !slices.Equal(got, want) {
				t.Errorf("sandbox timers = %v, want %v", got, want)
			}
			if stored, _ := srv.Sandbox(sb.ID); stored.Retention.Type != string(tt.wantType) || stored.Retention.AutoStopMinutes != tt.wantStop {
				t.Errorf("server stored %+v", stored)
			}
		})
	}
}
