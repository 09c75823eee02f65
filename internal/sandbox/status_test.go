package sandbox

import (
	"testing"
	"time"
)

func TestStatusOf(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	created := now.Add(-time.Hour)
	tests := []struct {
		name    string
		state   State
		expires *time.Time
		lastAct *time.Time
		in      StatusInput
		want    Status
	}{
		{name: "creating", state: StateCreating, want: StatusCreating},
		{name: "starting", state: StateStarting, want: StatusStarting},
		{name: "restoring is starting", state: StateRestoring, want: StatusStarting},
		{name: "running, fresh activity: ready", state: StateRunning, lastAct: at(-time.Minute), want: StatusReady},
		{name: "running, command in flight", state: StateRunning, lastAct: at(-time.Hour), in: StatusInput{Busy: 1}, want: StatusRunning},
		{name: "running, no activity for 5 min: idle", state: StateRunning, lastAct: at(-5 * time.Minute), want: StatusIdle},
		{name: "running, in-memory activity wins", state: StateRunning, lastAct: at(-time.Hour), in: StatusInput{LastActivity: now.Add(-time.Second)}, want: StatusReady},
		{name: "running, no activity ever counts from create", state: StateRunning, want: StatusIdle},
		{name: "custom idle window", state: StateRunning, lastAct: at(-2 * time.Second), in: StatusInput{IdleAfter: time.Second}, want: StatusIdle},
		{name: "stopped is idle", state: StateStopped, want: StatusIdle},
		{name: "stopping is idle", state: StateStopping, want: StatusIdle},
		{name: "archived is idle", state: StateArchived, want: StatusIdle},
		{name: "archiving is idle", state: StateArchiving, want: StatusIdle},
		{name: "deleting is destroyed", state: StateDeleting, want: StatusDestroyed},
		{name: "deleted is destroyed", state: StateDeleted, want: StatusDestroyed},
		{name: "failed", state: StateFailed, want: StatusFailed},
		{name: "last minute: expiring", state: StateRunning, expires: at(59 * time.Second), lastAct: at(0), want: StatusExpiring},
		{name: "exactly one minute left: expiring", state: StateRunning, expires: at(time.Minute), lastAct: at(0), want: StatusExpiring},
		{name: "past expiry, not yet destroyed: expiring", state: StateRunning, expires: at(-time.Second), want: StatusExpiring},
		{name: "more than a minute left: ready", state: StateRunning, expires: at(61 * time.Second), lastAct: at(0), want: StatusReady},
		{name: "expiring wins over running", state: StateRunning, expires: at(time.Second), in: StatusInput{Busy: 2}, want: StatusExpiring},
		{name: "expiring while creating", state: StateCreating, expires: at(time.Second), want: StatusExpiring},
		{name: "custom expiring window", state: StateRunning, expires: at(5 * time.Minute), lastAct: at(0), in: StatusInput{ExpiringWindow: 10 * time.Minute}, want: StatusExpiring},
		{name: "destroyed wins over expiring", state: StateDeleting, expires: at(time.Second), want: StatusDestroyed},
		{name: "failed wins over expiring", state: StateFailed, expires: at(time.Second), want: StatusFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := Sandbox{State: tc.state, ExpiresAt: tc.expires, LastActivityAt: tc.lastAct, CreatedAt: created}
			in := tc.in
			in.Now = now
			if got := StatusOf(sb, in); got != tc.want {
				t.Errorf("StatusOf = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestStatusOfEveryState checks that every state maps to one of the
// statuses docs/lifecycle.md lists.
func TestStatusOfEveryState(t *testing.T) {
	valid := map[Status]bool{StatusCreating: true, StatusStarting: true, StatusReady: true, StatusRunning: true,
		StatusIdle: true, StatusExpiring: true, StatusDestroyed: true, StatusFailed: true}
	for _, st := range AllStates {
		if got := StatusOf(Sandbox{State: st}, StatusInput{Now: time.Now()}); !valid[got] {
			t.Errorf("StatusOf(%s) = %q, not a documented status", st, got)
		}
	}
}

// TestStartsOn: a stopped sandbox may start on any host only while its
// stop snapshot was taken at or after its stop; an archived one always;
// a sandbox in any other state says nothing.
func TestStartsOn(t *testing.T) {
	stop := time.Date(2026, 12, 5, 4, 0, 0, 123456789, time.UTC)
	ref := func(d time.Duration) *StopSnapshotRef {
		return &StopSnapshotRef{ID: "bk_1", At: stop.Truncate(time.Microsecond).Add(d)}
	}
	for _, tc := range []struct {
		name string
		sb   Sandbox
		want string
	}{
		{"stopped, no snapshot", Sandbox{State: StateStopped, StoppedAt: &stop}, StartsOnOwnHost},
		{"stopped, snapshot at the stop", Sandbox{State: StateStopped, StoppedAt: &stop, StopSnapshot: ref(0)}, StartsOnAnyHost},
		{"stopped, snapshot after", Sandbox{State: StateStopped, StoppedAt: &stop, StopSnapshot: ref(time.Second)}, StartsOnAnyHost},
		{"stopped again since the snapshot", Sandbox{State: StateStopped, StoppedAt: &stop, StopSnapshot: ref(-time.Microsecond)}, StartsOnOwnHost},
		{"stopped, no stop time", Sandbox{State: StateStopped, StopSnapshot: ref(0)}, StartsOnOwnHost},
		{"archived", Sandbox{State: StateArchived}, StartsOnAnyHost},
		{"running", Sandbox{State: StateRunning, StoppedAt: &stop, StopSnapshot: ref(0)}, ""},
	} {
		if got := tc.sb.StartsOn(); got != tc.want {
			t.Errorf("%s: StartsOn() = %q, want %q", tc.name, got, tc.want)
		}
	}
}
