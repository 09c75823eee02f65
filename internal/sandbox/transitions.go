package sandbox

// transitions is the lifecycle's one table of allowed state changes. Every
// transitional state has a way forward and a way out (failed or deleting),
// and failed itself can be started, stopped or deleted: no state is a dead
// end. Staying in a state (to update other fields) is allowed for every
// state but deleted.
var transitions = map[State][]State{
	StateCreating:  {StateRunning, StateFailed, StateDeleting},
	StateStarting:  {StateRunning, StateFailed, StateDeleting},
	StateRunning:   {StateStopping, StateRestoring, StateFailed, StateDeleting},
	StateStopping:  {StateStopped, StateFailed, StateDeleting},
	StateStopped:   {StateStarting, StateArchiving, StateRestoring, StateDeleting},
	StateArchiving: {StateArchived, StateStopped, StateFailed, StateDeleting},
	StateArchived:  {StateRestoring, StateDeleting},
	StateRestoring: {StateStarting, StateRunning, StateArchived, StateFailed, StateDeleting},
	StateDeleting:  {StateDeleted},
	StateDeleted:   {},
	StateFailed:    {StateStarting, StateStopping, StateStopped, StateRestoring, StateDeleting},
}

// CanTransition reports whether a sandbox may go from one state to another.
func CanTransition(from, to State) bool {
	if from == to {
		return from != StateDeleted && from.Valid()
	}
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Transitional reports whether s is a state the platform is working to
// leave; each has a deadline after which the reconciler steps in.
func (s State) Transitional() bool {
	switch s {
	case StateCreating, StateStarting, StateStopping, StateArchiving, StateRestoring, StateDeleting:
		return true
	}
	return false
}
