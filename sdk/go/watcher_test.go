package platinum

import (
	"fmt"
	"slices"
	"testing"
)

// TestWatcherReportsNews: OnStateChange hears each new state and each new
// known percent, never a repeat of the line it last gave (a restore whose
// download finished while it still boots once printed "restoring…" twice).
func TestWatcherReportsNews(t *testing.T) {
	prog := func(done int64) *Progress { return &Progress{Op: "restore", DoneBytes: done, TotalBytes: 100} }
	tests := []struct {
		name string
		seen []Sandbox
		want []string
	}{
		{"states", []Sandbox{{State: StateStopped}, {State: StateStarting}, {State: StateStarting}, {State: StateRunning}},
			[]string{"stopped -1", "starting -1", "running -1"}},
		{"progress ends within the state", []Sandbox{{State: StateRestoring}, {State: StateRestoring, Progress: prog(100)},
			{State: StateRestoring}, {State: StateStarting}},
			[]string{"restoring -1", "restoring 100", "starting -1"}},
		{"progress moves", []Sandbox{{State: StateArchiving, Progress: prog(10)}, {State: StateArchiving, Progress: prog(10)},
			{State: StateArchiving, Progress: prog(60)}, {State: StateArchived}},
			[]string{"archiving 10", "archiving 60", "archived -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			o := lifecycleOptions{onState: func(sb *Sandbox) { got = append(got, fmt.Sprintf("%s %d", sb.State, sb.Progress.Percent())) }}
			seen := o.watcher()
			for i := range tt.seen {
				seen(&tt.seen[i])
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("calls %q, want %q", got, tt.want)
			}
		})
	}
}
