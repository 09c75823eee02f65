package sandbox

import "testing"

// TestTransitionsExhaustive checks every (from, to) pair against the
// lifecycle docs/lifecycle.md draws, so a change to the table is a deliberate one.
func TestTransitionsExhaustive(t *testing.T) {
	allowed := map[[2]State]bool{}
	for _, p := range [][2]State{
		{StateCreating, StateRunning}, {StateCreating, StateFailed}, {StateCreating, StateDeleting},
		{StateStarting, StateRunning}, {StateStarting, StateFailed}, {StateStarting, StateDeleting},
		{StateRunning, StateStopping}, {StateRunning, StateRestoring}, {StateRunning, StateFailed}, {StateRunning, StateDeleting},
		{StateStopping, StateStopped}, {StateStopping, StateFailed}, {StateStopping, StateDeleting},
		{StateStopped, StateStarting}, {StateStopped, StateArchiving}, {StateStopped, StateRestoring}, {StateStopped, StateDeleting},
		{StateArchiving, StateArchived}, {StateArchiving, StateStopped}, {StateArchiving, StateFailed}, {StateArchiving, StateDeleting},
		{StateArchived, StateRestoring}, {StateArchived, StateDeleting},
		{StateRestoring, StateStarting}, {StateRestoring, StateRunning}, {StateRestoring, StateArchived}, {StateRestoring, StateFailed}, {StateRestoring, StateDeleting},
		{StateDeleting, StateDeleted},
		{StateFailed, StateStarting}, {StateFailed, StateStopping}, {StateFailed, StateStopped}, {StateFailed, StateRestoring}, {StateFailed, StateDeleting},
	} {
		allowed[p] = true
	}
	for _, from := range AllStates {
		for _, to := range AllStates {
			want := allowed[[2]State{from, to}] || (from == to && from != StateDeleted)
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
	if CanTransition("bogus", StateRunning) || CanTransition("bogus", "bogus") {
		t.Error("unknown states must not transition")
	}
}

// TestNoDeadEnds checks every state but deleted can reach deleted.
func TestNoDeadEnds(t *testing.T) {
	for _, s := range AllStates {
		seen := map[State]bool{s: true}
		queue := []State{s}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			for _, n := range transitions[cur] {
				if !seen[n] {
					seen[n] = true
					queue = append(queue, n)
				}
			}
		}
		if !seen[StateDeleted] {
			t.Errorf("state %s cannot reach deleted", s)
		}
	}
}
