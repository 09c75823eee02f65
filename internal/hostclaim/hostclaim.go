// Package hostclaim keeps two ptd daemons on one machine from sharing what
// only one can own: a data dir, a sandbox bridge, an address pool (the
// gateway address the egress proxy and sandbox API bind to) and a cgroup
// parent. Each running ptd holds an flock on a claim file naming them in a
// machine-wide directory; a second ptd whose claim collides with a live
// one fails at start-up, before it touches anything, with the flags to
// change. The kernel drops an flock when its process dies, so a crashed
// ptd's claim is stale at once and is removed by the next start.
package hostclaim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultDir is where claims live: /run is per boot, like the bridges and
// cgroups claimed.
const DefaultDir = "/run/platinum/claims"

// Claim is what one ptd owns on the machine.
type Claim struct {
	DataDir      string       `json:"data_dir"`
	Bridge       string       `json:"bridge"`
	Subnet       netip.Prefix `json:"subnet"`
	CgroupParent string       `json:"cgroup_parent"`
	PID          int          `json:"pid"`
}

// ConflictError is a claim that collides with a live ptd's.
type ConflictError struct {
	Other Claim
	What  []string // "data dir /x", "bridge pt0", …
	Flags []string // the flags that would separate them
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("another ptd (pid %d, data dir %s) already uses %s on this machine; give this one its own %s, or stop the other",
		e.Other.PID, e.Other.DataDir, strings.Join(e.What, ", "), strings.Join(e.Flags, ", "))
}

// Held is a claim this process holds; Release gives it up.
type Held struct {
	f    *os.File
	path string
}

// Release removes the claim and drops its lock.
func (h *Held) Release() {
	if h == nil || h.f == nil {
		return
	}
	os.Remove(h.path)
	h.f.Close()
	h.f = nil
}

// Acquire checks c against the live claims in dir and records it there,
// held until Release or the process's end. c.PID is filled in.
func Acquire(dir string, c Claim) (*Held, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	// One checker at a time: two daemons starting together must not both
	// see the other's claim missing.
	guard, err := lock(filepath.Join(dir, ".lock"), false)
	if err != nil {
		return nil, err
	}
	defer guard.Close()
	c.PID = os.Getpid()
	c.DataDir = filepath.Clean(c.DataDir)
	paths, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, p := range paths {
		other, live, err := inspect(p)
		if err != nil {
			return nil, err
		}
		if !live {
			os.Remove(p) // its ptd is gone
			continue
		}
		if err := conflict(c, other); err != nil {
			return nil, err
		}
	}
	sum := sha256.Sum256([]byte(c.DataDir))
	path := filepath.Join(dir, hex.EncodeToString(sum[:8])+".json")
	f, err := lock(path, true)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(c)
	if err = f.Truncate(0); err == nil {
		_, err = f.WriteAt(append(b, '\n'), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("claims: %w", err)
	}
	return &Held{f: f, path: path}, nil
}

// lock opens path and takes its exclusive flock (at once when nb, failing
// if another holds it).
func lock(path string, nb bool) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	how := unix.LOCK_EX
	if nb {
		how |= unix.LOCK_NB
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("claims: lock %s: %w", path, err)
	}
	return f, nil
}

// inspect reads the claim at p and reports whether its ptd still holds it.
func inspect(p string) (Claim, bool, error) {
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return Claim{}, false, nil
	}
	if err != nil {
		return Claim{}, false, fmt.Errorf("claims: %w", err)
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return Claim{}, false, nil
	}
	if !errors.Is(err, unix.EWOULDBLOCK) {
		return Claim{}, false, fmt.Errorf("claims: lock %s: %w", p, err)
	}
	var c Claim
	b, _ := os.ReadFile(p)
	if err := json.Unmarshal(b, &c); err != nil {
		// Held but unreadable (being written): treat it as a live claim
		// of everything rather than risk sharing.
		return Claim{}, false, fmt.Errorf("claims: %s is held by a running ptd but unreadable: %v", p, err)
	}
	return c, true, nil
}

// conflict reports what c shares with other, a live claim.
func conflict(c, other Claim) error {
	e := &ConflictError{Other: other}
	if c.DataDir == other.DataDir {
		e.What, e.Flags = append(e.What, "data dir "+c.DataDir), append(e.Flags, "--data-dir")
	}
	if c.Bridge == other.Bridge {
		e.What, e.Flags = append(e.What, "bridge "+c.Bridge), append(e.Flags, "--bridge")
	}
	if c.Subnet.IsValid() && other.Subnet.IsValid() && c.Subnet.Overlaps(other.Subnet) {
		e.What, e.Flags = append(e.What, fmt.Sprintf("address pool %s (this one asks for %s)", other.Subnet, c.Subnet)), append(e.Flags, "--subnet")
	}
	if c.CgroupParent == other.CgroupParent {
		e.What, e.Flags = append(e.What, "cgroup parent "+c.CgroupParent), append(e.Flags, "--cgroup-parent")
	}
	if len(e.What) == 0 {
		return nil
	}
	return e
}
