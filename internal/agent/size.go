package agent

import (
	"net/http"
	"runtime"

	"golang.org/x/sys/unix"
)

// guestSize is GET /size's body: the size the sandbox sees from inside,
// read at the moment of the request. The control plane reports it after a
// live resize (live.guest_cpus_online and guest_mem_total_mb, docs/resize.md),
// so the answer says what nproc and /proc/meminfo show, not what was
// asked.
type guestSize struct {
	CPUsOnline int    `json:"cpus_online"`
	MemTotalMB uint64 `json:"mem_total_mb"`
}

func (s *Server) handleSize(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, readGuestSize())
}

// readGuestSize counts the CPUs this process may run on (what nproc
// counts; runtime.NumCPU is fixed at start and misses a live resize) and
// reads MemTotal from /proc/meminfo (LXCFS's per-sandbox view under runc).
func readGuestSize() guestSize {
	g := guestSize{CPUsOnline: runtime.NumCPU()}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil && set.Count() > 0 {
		g.CPUsOnline = set.Count()
	}
	if mem, err := readMeminfo(); err == nil {
		g.MemTotalMB = mem["MemTotal"] >> 20
	}
	return g
}
