package host

import (
	"testing"
	"time"
)

func TestCPULoad(t *testing.T) {
	busy, idle, ok := readCPUStat()
	if !ok || busy == 0 || idle == 0 {
		t.Fatalf("readCPUStat = %d %d %v", busy, idle, ok)
	}
	var l CPULoad
	if l.Over(0) {
		t.Fatal("the first read has no interval yet and must report 0%")
	}
	// A second apart, the host's CPU use is a percentage: over -1, not over 100.
	l.at = l.at.Add(-time.Second)
	if !l.Over(-1) || l.Over(100) {
		t.Fatalf("measured %v%%", l.pct)
	}
}
