package controlplane

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/platinum-dev/platinum/internal/metrics"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// outcome classifies an operation's error for the lifecycle metrics: a
// refusal is the caller's (wrong state, input, quota, a busy host), an
// error the platform's.
func outcome(err error) string {
	switch {
	case err == nil:
		return metrics.OutcomeOK
	case errors.Is(err, sandbox.ErrInvalidArgument), errors.Is(err, sandbox.ErrNotFound),
		errors.Is(err, sandbox.ErrConflict), errors.Is(err, sandbox.ErrAlreadyExists),
		errors.Is(err, sandbox.ErrForbidden), errors.Is(err, sandbox.ErrUnauthenticated),
		errors.Is(err, sandbox.ErrQuotaExceeded), errors.As(err, new(*CapacityError)),
		errors.Is(err, context.Canceled):
		return metrics.OutcomeRefused
	}
	return metrics.OutcomeError
}

// observeRefusal records a lifecycle call that failed before any work
// began; a call that began work is recorded when its sandbox leaves the
// transitional state (observeTransition).
func observeRefusal(op, runtime string, start time.Time, err error) {
	if err != nil {
		metrics.Lifecycle(op, runtime, outcome(err), time.Since(start))
	}
}

// observeSync records a synchronous lifecycle call (snapshot, fork).
func observeSync(op, runtime string, start time.Time, err error) {
	metrics.Lifecycle(op, runtime, outcome(err), time.Since(start))
}

// opStart is when a sandbox entered a transitional state, and for which
// operation. Keyed by sandbox ID, which is unique across services.
type opStart struct {
	op string
	at time.Time
}

var opStarts sync.Map // sandbox ID -> opStart

// transitionalOp names the operation a sandbox entering state `to` from
// `from` is doing ("" when `to` is not transitional).
func transitionalOp(from sandbox.Sandbox, to sandbox.Sandbox) string {
	switch to.State {
	case sandbox.StateCreating:
		return "create"
	case sandbox.StateStarting:
		return "start"
	case sandbox.StateStopping:
		return "stop"
	case sandbox.StateArchiving:
		return "archive"
	case sandbox.StateRestoring:
		if from.State == sandbox.StateArchived && to.RestoreSnapshotID == "" {
			return "start" // a start of an archived sandbox
		}
		return "restore"
	}
	return ""
}

// opTargets is the state each asynchronous operation is after: reaching
// it is ok; failing is an error, being deleted on the way a refusal, and
// ending anywhere else an error too (an archive the object store refused
// goes back to stopped, a start of an archived sandbox whose restore
// failed back to archived).
var opTargets = map[string]sandbox.State{
	"create": sandbox.StateRunning, "start": sandbox.StateRunning, "stop": sandbox.StateStopped,
	"archive": sandbox.StateArchived, "restore": sandbox.StateRunning,
}

// transitionOutcome is how op ended when its sandbox reached state.
func transitionOutcome(op string, state sandbox.State) string {
	switch state {
	case opTargets[op]:
		return metrics.OutcomeOK
	case sandbox.StateDeleting, sandbox.StateDeleted:
		return metrics.OutcomeRefused // deleted before it finished
	}
	return metrics.OutcomeError
}

// observeTransition is called by update for every state change: entering
// a transitional state starts the operation's clock, leaving it records
// the operation once, by where the sandbox ended (transitionOutcome). A
// step from one transitional state to another of the same operation (an
// archived sandbox's start: restoring, then starting) goes on timing it.
func observeTransition(cur, out sandbox.Sandbox) {
	if cur.State == out.State {
		return
	}
	op := transitionalOp(cur, out)
	if st, ok := opStarts.LoadAndDelete(out.ID); ok {
		o := st.(opStart)
		if o.op == op {
			opStarts.Store(out.ID, o)
			return
		}
		metrics.Lifecycle(o.op, out.Runtime, transitionOutcome(o.op, out.State), time.Since(o.at))
	} else if cur.State == sandbox.StateCreating {
		// Inserted by Create (not an update); timed from the insert.
		metrics.Lifecycle("create", out.Runtime, transitionOutcome("create", out.State), time.Since(cur.CreatedAt))
	}
	if op != "" {
		opStarts.Store(out.ID, opStart{op: op, at: time.Now()})
	}
}

// Collector reads this service's state at scrape time: sandboxes by state,
// the resources of active sandboxes, and the admission queue.
func (s *Service) Collector() prometheus.Collector { return &collector{s: s} }

type collector struct{ s *Service }

var (
	descSandboxes = prometheus.NewDesc(metrics.Namespace+"_sandboxes",
		"Sandboxes by state, every org (deleted ones until they are purged).", []string{"state"}, nil)
	descCapacity = prometheus.NewDesc(metrics.Namespace+"_host_capacity_used",
		"Resources that sandboxes holding them are sized for (cpu: cores, ram_mb, disk_gb), summed over those not stopped, archived, deleted or failed.",
		[]string{"resource"}, nil)
	descQueue = prometheus.NewDesc(metrics.Namespace+"_admission_queue_depth",
		"Starts waiting for a start slot now.", nil, nil)
	descActive = prometheus.NewDesc(metrics.Namespace+"_admission_starts_in_flight",
		"Starts holding a start slot now.", nil, nil)
	descScrapeErr = prometheus.NewDesc(metrics.Namespace+"_store_scrape_errors",
		"1 when reading the store for this scrape failed.", nil, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSandboxes
	ch <- descCapacity
	ch <- descQueue
	ch <- descActive
	ch <- descScrapeErr
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	waiting, active := c.s.starts.stats()
	ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(waiting))
	ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(active))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	totals, err := c.s.store.SandboxTotals(ctx)
	failed := 0.0
	if err != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(descScrapeErr, prometheus.GaugeValue, failed)
	var cpu float64
	var ram, disk int64
	counts := map[sandbox.State]int{}
	for _, st := range sandbox.AllStates {
		counts[st] = 0 // a state with none is 0, not a missing series
	}
	for _, t := range totals {
		counts[t.State] += t.Count
		switch t.State {
		case sandbox.StateStopped, sandbox.StateArchived, sandbox.StateDeleted, sandbox.StateFailed:
			continue // they hold no CPU or RAM (a frozen one's RAM is the warm budget's)
		}
		cpu, ram, disk = cpu+t.CPU, ram+t.RAMMB, disk+t.DiskGB
	}
	for st, n := range counts {
		ch <- prometheus.MustNewConstMetric(descSandboxes, prometheus.GaugeValue, float64(n), string(st))
	}
	ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, cpu, "cpu")
	ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(ram), "ram_mb")
	ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(disk), "disk_gb")
}

// The lifecycle calls below are the unexported ones of the same name
// (documented there), recorded in the lifecycle metrics: a refusal at
// once, work that began when its sandbox reaches its state
// (observeTransition), snapshots and forks when they return.

// Create records a new sandbox and starts provisioning it (create).
func (s *Service) Create(ctx context.Context, p Principal, r CreateRequest) (sandbox.Sandbox, error) {
	t0 := time.Now()
	sb, err := s.create(ctx, p, r)
	rt := r.Runtime
	if rt == "" {
		rt = s.cfg.DefaultRuntime
	}
	observeRefusal("create", rt, t0, err)
	return sb, err
}

// Start brings a stopped, archived or failed sandbox back to running (startWithin).
func (s *Service) Start(ctx context.Context, p Principal, id string) (sandbox.Sandbox, error) {
	return s.StartWithin(ctx, p, id, 0)
}

// StartWithin is Start whose wait for a host start slot ends after
// queueWait when that is shorter than the configured bound (startWithin).
func (s *Service) StartWithin(ctx context.Context, p Principal, id string, queueWait time.Duration) (sandbox.Sandbox, error) {
	t0 := time.Now()
	sb, err := s.startWithin(ctx, p, id, queueWait)
	observeRefusal("start", s.runtimeOf(ctx, sb, id), t0, err)
	return sb, err
}

// Archive moves a stopped sandbox's disk to the object store (archive).
func (s *Service) Archive(ctx context.Context, p Principal, id string) (sandbox.Sandbox, error) {
	t0 := time.Now()
	sb, err := s.archive(ctx, p, id)
	observeRefusal("archive", s.runtimeOf(ctx, sb, id), t0, err)
	return sb, err
}

// Restore rolls a sandbox back to one of its snapshots (restore).
func (s *Service) Restore(ctx context.Context, p Principal, id, snapID string) (sandbox.Sandbox, error) {
	t0 := time.Now()
	sb, err := s.restore(ctx, p, id, snapID)
	observeRefusal("restore", s.runtimeOf(ctx, sb, id), t0, err)
	return sb, err
}

// Snapshot takes a snapshot of a running or stopped sandbox (snapshotCall).
func (s *Service) Snapshot(ctx context.Context, p Principal, id string, r SnapshotRequest) (sandbox.Snapshot, error) {
	t0 := time.Now()
	snap, err := s.snapshotCall(ctx, p, id, r)
	rt := snap.Source.Runtime
	if rt == "" {
		rt = s.runtimeOf(ctx, sandbox.Sandbox{}, id)
	}
	observeSync("snapshot", rt, t0, err)
	return snap, err
}

// Fork makes Count new sandboxes from a running one (fork).
func (s *Service) Fork(ctx context.Context, p Principal, id string, r ForkRequest) (ForkResult, error) {
	t0 := time.Now()
	res, err := s.fork(ctx, p, id, r)
	rt := ""
	if len(res.Sandboxes) > 0 {
		rt = res.Sandboxes[0].Runtime
	} else {
		rt = s.runtimeOf(ctx, sandbox.Sandbox{}, id)
	}
	observeSync("fork", rt, t0, err)
	return res, err
}

// runtimeOf is the runtime class an operation on sandbox id is recorded
// under: the one of the record the call returned, or, for a call refused
// before it read one, of the stored record ("" when there is none).
func (s *Service) runtimeOf(ctx context.Context, sb sandbox.Sandbox, id string) string {
	if sb.Runtime != "" {
		return sb.Runtime
	}
	if stored, err := s.store.GetSandbox(context.WithoutCancel(ctx), "", id); err == nil {
		return stored.Runtime
	}
	return ""
}
