package host

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CPULoad reports the host's CPU use, measured from /proc/stat between
// two reads at least a second apart (on the monotonic clock), so callers
// on a hot path get a cached value. The start admission queue uses it to
// run fewer starts at once while a resume storm saturates the host.
type CPULoad struct {
	mu         sync.Mutex
	at         time.Time
	busy, idle uint64
	pct        float64
}

// Over reports whether the CPU use measured last is over pct percent.
func (l *CPULoad) Over(pct float64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.at.IsZero() || time.Since(l.at) >= time.Second {
		if busy, idle, ok := readCPUStat(); ok {
			if !l.at.IsZero() {
				if d := (busy - l.busy) + (idle - l.idle); d > 0 {
					l.pct = 100 * float64(busy-l.busy) / float64(d)
				}
			}
			l.at, l.busy, l.idle = time.Now(), busy, idle
		}
	}
	return l.pct > pct
}

// readCPUStat returns the busy and idle jiffies of /proc/stat's cpu line.
func readCPUStat() (busy, idle uint64, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0, false
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, false
	}
	for i, v := range fields[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		} else if i < 7 { // user nice system … irq softirq (steal and guests are not ours)
			busy += n
		}
	}
	return busy, idle, true
}
