// Package hostreg keeps a sandbox host's entry in the shared store
// (docs/ARCHITECTURE.md, "Many hosts"): a ptd that runs sandboxes
// registers its host with what it offers (cpu, ram, disk, runtime classes,
// checkpoint support, GPUs) and heartbeats its load, and one ptd at a time,
// under a lease, marks hosts that stopped heartbeating lost. It knows the
// store and the host contract's HostInfo, nothing of transports.
package hostreg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Capacity is the document a host registers: what it can run.
type Capacity struct {
	CPU     int        `json:"cpu"`
	RAMMB   int        `json:"ram_mb"`
	DiskGB  int        `json:"disk_gb"`
	Classes []ClassCap `json:"runtime_classes"`
	GPUs    []GPUCap   `json:"gpus"`
	LXCFS   bool       `json:"lxcfs"`
}

// Runs reports whether the host runs runtime class (any, when empty).
func (c Capacity) Runs(class string) bool {
	return class == "" || slices.ContainsFunc(c.Classes, func(cl ClassCap) bool { return cl.Name == class })
}

// ClassCap is one runtime class and whether it keeps memory across a stop.
type ClassCap struct {
	Name             string `json:"name"`
	Checkpoint       bool   `json:"checkpoint"`
	CheckpointReason string `json:"checkpoint_reason,omitempty"`
	StopKeepsMemory  string `json:"stop_keeps_memory,omitempty"`
}

// GPUCap is one GPU of the host; Usable is false when no sandbox can have
// it (no CDI device).
type GPUCap struct {
	Model    string `json:"model"`
	MemoryMB int    `json:"memory_mb"`
	Usable   bool   `json:"usable"`
}

// Resources is what the machine has, measured by the caller (ptd serve).
type Resources struct {
	CPU    int
	RAMMB  int
	DiskGB int
}

// CapacityOf builds the capacity document from the host's info and the
// machine's resources.
func CapacityOf(info hostapi.HostInfo, r Resources) Capacity {
	c := Capacity{CPU: r.CPU, RAMMB: r.RAMMB, DiskGB: r.DiskGB, LXCFS: info.LXCFS,
		Classes: []ClassCap{}, GPUs: []GPUCap{}}
	for _, cl := range info.Classes {
		c.Classes = append(c.Classes, ClassCap{Name: cl.Name, Checkpoint: cl.Checkpoint,
			CheckpointReason: cl.CheckpointReason, StopKeepsMemory: cl.StopKeepsMemory})
	}
	for _, g := range info.GPUs {
		c.GPUs = append(c.GPUs, GPUCap{Model: g.Model, MemoryMB: g.MemoryMB, Usable: g.Usable()})
	}
	return c
}

// Status is the document a host heartbeats: its sandboxes by state as
// the store has them placed on it, and what the live ones reserve.
type Status struct {
	Sandboxes map[string]int `json:"sandboxes"`
	CPU       float64        `json:"cpu"`
	RAMMB     int            `json:"ram_mb"`
	DiskGB    int            `json:"disk_gb"`
}

// Live are the states whose sandboxes hold a host's cpu and ram.
var Live = []sandbox.State{sandbox.StateCreating, sandbox.StateStarting, sandbox.StateRunning,
	sandbox.StateStopping, sandbox.StateRestoring}

// Registrar keeps one host registered and heartbeating.
type Registrar struct {
	Store    store.ClusterStore
	Host     store.HostRecord // ID, Region, URL
	Capacity Capacity
	// Status reports the host's load at each heartbeat (nil: none).
	Status   func(ctx context.Context) (Status, error)
	Interval time.Duration
	Log      *slog.Logger
	// FenceAfter, when positive, is how long heartbeats may fail before
	// Fence is called: a host cut off from the store must stop running
	// its sandboxes before the others mark it lost (--host-lost-after)
	// and recover them elsewhere, so FenceAfter must be shorter. A host
	// that was the only one not lost at its last heartbeat is never
	// fenced: no other could recover its sandboxes. Unfence is called at
	// the first heartbeat that gets through again.
	FenceAfter     time.Duration
	Fence, Unfence func(ctx context.Context)

	gen int64
}

// Register records the host joining (a new generation) and returns its
// record. Run calls it; ptd serve calls it first so a store that refuses
// stops the start.
func (r *Registrar) Register(ctx context.Context) (store.HostRecord, error) {
	b, err := json.Marshal(r.Capacity)
	if err != nil {
		return store.HostRecord{}, err
	}
	h := r.Host
	h.Capacity = b
	rec, err := r.Store.RegisterHost(ctx, h)
	if err != nil {
		return store.HostRecord{}, fmt.Errorf("register host %s: %w", h.ID, err)
	}
	r.gen = rec.Generation
	return rec, nil
}

// Heartbeat sends one heartbeat of the current generation. A refused one
// (the host was marked lost, or registered again elsewhere) registers
// again under a new generation.
func (r *Registrar) Heartbeat(ctx context.Context) (store.HostRecord, error) {
	var st Status
	if r.Status != nil {
		var err error
		if st, err = r.Status(ctx); err != nil {
			return store.HostRecord{}, err
		}
	}
	b, err := json.Marshal(st)
	if err != nil {
		return store.HostRecord{}, err
	}
	rec, err := r.Store.HeartbeatHost(ctx, r.Host.ID, r.gen, b)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		r.Log.Warn("host heartbeat refused; registering again", "host", r.Host.ID, "generation", r.gen, "err", err)
		if rec, err = r.Register(ctx); err != nil {
			return store.HostRecord{}, err
		}
		return r.Store.HeartbeatHost(ctx, r.Host.ID, rec.Generation, b)
	}
	return rec, err
}

// Run heartbeats every Interval until ctx ends, fencing the host while
// the store cannot be reached (FenceAfter). It expects Register to have
// been called. A heartbeat gets at most one Interval.
func (r *Registrar) Run(ctx context.Context) {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	lastOK, fenced, alone := time.Now(), false, true
	for {
		// A heartbeat stuck on a connection that no longer answers ends
		// in time to fence.
		hctx, cancel := context.WithTimeout(ctx, max(r.Interval, r.FenceAfter/2))
		t0 := time.Now()
		_, err := r.Heartbeat(hctx)
		if gap := time.Since(lastOK); err == nil && gap > 4*r.Interval {
			// Others mark the host lost after --host-lost-after without
			// one: say where the time went (the loop's own wait, or the
			// heartbeat's store calls).
			r.Log.Warn("host heartbeat late", "host", r.Host.ID, "since_last", gap, "took", time.Since(t0), "interval", r.Interval)
		}
		if err == nil && r.FenceAfter > 0 {
			alone = r.alone(hctx)
		}
		cancel()
		switch {
		case ctx.Err() != nil:
		case err == nil:
			lastOK = time.Now()
			if fenced {
				fenced = false
				r.Log.Warn("host reaches the store again; unfencing its sandboxes", "host", r.Host.ID)
				if r.Unfence != nil {
					r.Unfence(ctx)
				}
			}
		default:
			r.Log.Warn("host heartbeat", "host", r.Host.ID, "err", err)
			// A host that was alone has no one to recover its sandboxes:
			// a store it cannot reach stops nothing.
			if !fenced && !alone && r.FenceAfter > 0 && time.Since(lastOK) >= r.FenceAfter {
				fenced = true
				r.Log.Error("host cannot reach the store; fencing its sandboxes", "host", r.Host.ID, "since", lastOK)
				if r.Fence != nil {
					r.Fence(ctx)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// alone reports whether no other host that is not lost is registered:
// then none could mark this one lost and recover its sandboxes. An error
// counts as not alone.
func (r *Registrar) alone(ctx context.Context) bool {
	hs, err := r.Store.ListHosts(ctx)
	if err != nil {
		return false
	}
	for _, h := range hs {
		if h.ID != r.Host.ID && h.State != store.HostLost {
			return false
		}
	}
	return true
}

// StatusFrom sums a host's sandboxes from the store: counts by state for
// every state but deleted, reservations of the live ones.
func StatusFrom(s store.Store, hostID string) func(ctx context.Context) (Status, error) {
	return func(ctx context.Context) (Status, error) {
		st := Status{Sandboxes: map[string]int{}}
		for _, state := range sandbox.AllStates {
			if state == sandbox.StateDeleted {
				continue
			}
			u, err := s.HostUsage(ctx, state)
			if err != nil {
				return Status{}, err
			}
			if n := u[hostID].Sandboxes; n > 0 {
				st.Sandboxes[string(state)] = n
			}
		}
		u, err := s.HostUsage(ctx, Live...)
		if err != nil {
			return Status{}, err
		}
		st.CPU, st.RAMMB, st.DiskGB = u[hostID].CPU, u[hostID].RAMMB, u[hostID].DiskGB
		return st, nil
	}
}

// LeaseLiveness is the lease of the loop that marks hosts lost.
const LeaseLiveness = "loop/host-liveness"

// Watcher marks hosts lost whose last heartbeat is older than LostAfter.
// Every ptd may run one; the lease lets one of them act at a time.
type Watcher struct {
	Store  store.ClusterStore
	Holder string
	// Self is the host of the watcher's own process, never marked lost by
	// it: a process that stalls past the bound (its heartbeats with it)
	// must not condemn its own sandboxes when it wakes.
	Self      string
	LostAfter time.Duration
	Interval  time.Duration
	Log       *slog.Logger
	// Lost is called for each host it marked lost, and again for every
	// lost host at each pass it holds the lease (nil: nothing); it must be
	// idempotent.
	Lost func(ctx context.Context, h store.HostRecord)
	// DeferToHosts makes the watcher of a process that runs no sandboxes
	// (an api-only ptd) act only while no other host is alive: Lost there
	// can mark a lost host's sandboxes but not recover them onto a host of
	// its own, which a host's watcher does. So hosts watch while any
	// lives, and the last one's death is still marked.
	DeferToHosts bool

	held bool // the lease at the last pass
}

// Check runs one pass if this watcher holds the lease, and returns the
// hosts it marked lost. One goroutine calls it (Run's).
func (w *Watcher) Check(ctx context.Context) ([]store.HostRecord, error) {
	if w.DeferToHosts {
		hosts, err := w.Store.ListHosts(ctx)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(hosts, func(h store.HostRecord) bool {
			return h.ID != w.Self && h.State != store.HostLost && time.Since(h.HeartbeatAt) <= w.LostAfter
		}) {
			// A live host's watcher takes the lease: this one gives it up
			// if it held it.
			if !w.held {
				return nil, nil
			}
			w.held = false
			return nil, w.Store.ReleaseLease(ctx, LeaseLiveness, w.Holder)
		}
	}
	_, held, err := w.Store.AcquireLease(ctx, LeaseLiveness, w.Holder, 3*w.Interval)
	w.held = held && err == nil
	if err != nil || !held {
		return nil, err
	}
	hosts, err := w.Store.ListHosts(ctx)
	if err != nil {
		return nil, err
	}
	var lost []store.HostRecord
	for _, h := range hosts {
		if h.ID != w.Self && h.State == store.HostLost && w.Lost != nil {
			// Again on every pass: what a lost host left is settled even
			// when the process that marked it died before it finished.
			w.Lost(ctx, h)
		}
		if h.ID == w.Self || h.State == store.HostLost || time.Since(h.HeartbeatAt) <= w.LostAfter {
			continue
		}
		reason := fmt.Sprintf("no heartbeat since %s (bound %s)", h.HeartbeatAt.Format(time.RFC3339), w.LostAfter)
		rec, err := w.Store.SetHostState(ctx, h.ID, h.Generation, store.HostLost, reason)
		if errors.Is(err, store.ErrConflict) {
			continue // it registered again meanwhile
		}
		if err != nil {
			return lost, err
		}
		w.Log.Warn("host lost", "host", h.ID, "generation", h.Generation, "reason", reason)
		lost = append(lost, rec)
		if w.Lost != nil {
			w.Lost(ctx, rec)
		}
	}
	return lost, nil
}

// Run checks every Interval until ctx ends, then gives the lease up.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	defer w.Store.ReleaseLease(context.WithoutCancel(ctx), LeaseLiveness, w.Holder)
	for {
		if _, err := w.Check(ctx); err != nil && ctx.Err() == nil {
			w.Log.Warn("host liveness", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
