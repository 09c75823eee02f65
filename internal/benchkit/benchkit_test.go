package benchkit

import (
	"testing"
	"time"
)

// TestReportWithoutSamples: a benchmark asked for no runs (-n 0 beside a
// burst) prints nothing instead of failing the whole bench.
func TestReportWithoutSamples(t *testing.T) {
	Report("none", nil, nil)
	Report("no baseline samples", []time.Duration{time.Millisecond}, []time.Duration{})
	Report("no samples against a baseline", nil, []time.Duration{time.Millisecond})
}

func TestPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if got, want := Percentiles(ds), [3]time.Duration{50 * time.Millisecond, 95 * time.Millisecond, 99 * time.Millisecond}; got != want {
		t.Errorf("Percentiles = %v, want %v", got, want)
	}
}
