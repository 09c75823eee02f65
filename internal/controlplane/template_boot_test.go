package controlplane

import (
	"testing"
	"time"
)

// TestReadyErrorSaysTheCommandsWords: when the deadline cut the last
// attempt, the reason still carries what the command itself last said.
func TestReadyErrorSaysTheCommandsWords(t *testing.T) {
	tests := []struct {
		name string
		e    ReadyError
		want string
	}{
		{"the last attempt answered", ReadyError{Timeout: 1500 * time.Millisecond, Last: "exit 1: not yet"},
			"ready_cmd did not pass within 1.5s (last attempt: exit 1: not yet)"},
		{"the deadline cut the last attempt", ReadyError{Timeout: 1500 * time.Millisecond, Last: "agent exec: context deadline exceeded", Answer: "exit 1: not yet"},
			"ready_cmd did not pass within 1.5s (last attempt: agent exec: context deadline exceeded; last answer: exit 1: not yet)"},
		{"it never answered", ReadyError{Timeout: time.Second, Last: "never ran"},
			"ready_cmd did not pass within 1s (last attempt: never ran)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}
