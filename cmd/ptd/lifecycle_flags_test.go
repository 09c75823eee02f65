package main

import (
	"testing"
	"time"
)

// TestLifecycleFlags pins the lifecycle defaults docs/lifecycle.md and docs/stop-start.md state (10 min warm
// window, 8 GiB warm budget, 30 days for deleted records, 90 for
// platform-deleted ones with recovery data) and that each is a flag, so
// tests run them in seconds.
func TestLifecycleFlags(t *testing.T) {
	def, err := parseConfig("ptd serve", nil)
	if err != nil {
		t.Fatal(err)
	}
	set, err := parseConfig("ptd serve", []string{"--warm-window", "2s", "--warm-budget-mb", "1024",
		"--deleted-retention", "3s", "--platform-recovery-retention", "9s", "--timer-interval", "100ms"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"default --warm-window", def.warmWindow, 10 * time.Minute},
		{"default --warm-budget-mb", def.warmBudgetMB, 8192},
		{"default --deleted-retention", def.deletedRetention, 30 * 24 * time.Hour},
		{"default --platform-recovery-retention", def.recoveryRetention, 90 * 24 * time.Hour},
		{"--warm-window", set.warmWindow, 2 * time.Second},
		{"--warm-budget-mb", set.warmBudgetMB, 1024},
		{"--deleted-retention", set.deletedRetention, 3 * time.Second},
		{"--platform-recovery-retention", set.recoveryRetention, 9 * time.Second},
		{"--timer-interval", set.timerInterval, 100 * time.Millisecond},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}
