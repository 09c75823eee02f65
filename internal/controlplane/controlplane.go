// Package controlplane is Platinum's lifecycle service: it validates
// requests, owns the sandbox state machine, drives hosts to the desired
// state in the background, and lets callers wait for states with bounded
// waits. Transports (REST, compatibility APIs) call it; it never imports
// net/http, so every transport sees the same semantics.
package controlplane

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Host is what the control plane needs of a sandbox host. The host layer
// (internal/host) implements it; tests may use a fake.
type Host interface {
	// ID names the host (host_…).
	ID() string
	// Templates lists the template slugs this host can build.
	Templates() []string
	// Classes lists the runtime classes this host runs.
	Classes() []string
	// Info describes the host for GET /v1/hosts.
	Info() HostInfo
	// BuildTemplate builds slug as version versionID and returns the
	// read-only rootfs path and its size. progress receives short lines.
	BuildTemplate(ctx context.Context, slug, versionID string, progress func(string)) (rootfs string, size int64, err error)
	// Start makes sure the sandbox runs: it creates what is missing (disk,
	// network, container) and reuses what exists, so it is safe to call
	// again after a crash. It returns once the agent answers.
	Start(ctx context.Context, spec StartSpec) (Instance, error)
	// Running reports whether the sandbox's container runs and its agent
	// answers.
	Running(ctx context.Context, id string) bool
	// Stop stops the sandbox, keeping its disk and address. With
	// keepMemory it keeps the processes where the host can (frozen in RAM,
	// or checkpointed to disk) and reports whether it did; otherwise, or
	// when it cannot, the processes end and only the disk stays (and a
	// checkpoint is dropped). Idempotent.
	Stop(ctx context.Context, id string, keepMemory bool) (memoryKept bool, err error)
	// Frozen reports whether a stopped sandbox still holds its memory in
	// RAM (the warm window and budget apply). A checkpoint on disk is not
	// frozen: it costs no RAM and the next start restores it whenever it
	// comes.
	Frozen(ctx context.Context, id string) bool
	// DiskImage stops the sandbox disk-only if needed and returns the path
	// of its disk image, for archiving. ErrNotFound when it has none.
	DiskImage(ctx context.Context, id string) (string, error)
	// DiskImagePath is where a restored disk image must be written.
	DiskImagePath(id string) string
	// RemoveDisk deletes the sandbox's local disk image. Idempotent.
	RemoveDisk(ctx context.Context, id string) error
	// Resize changes a running sandbox's CPU and memory in place; a
	// memory limit below what the sandbox uses wraps sandbox.ErrConflict.
	Resize(ctx context.Context, id string, cpu float64, ramMB int) error
	// GrowDisk grows the sandbox's disk (online when it runs).
	GrowDisk(ctx context.Context, id string, newGB int) error
	// Metrics reads live figures of a running sandbox.
	Metrics(ctx context.Context, id string) (Metrics, error)
	// Destroy removes every host resource of the sandbox. Idempotent.
	Destroy(ctx context.Context, id string) error
}

// StartSpec is what a host needs to run one sandbox.
type StartSpec struct {
	ID         string
	RootFS     string // template version's read-only rootfs
	CPU        float64
	RAMMB      int
	DiskGB     int
	AgentToken string
	// Runtime is the runtime class (runc, gvisor); empty means runc.
	Runtime string
	// Clone, when set, starts the sandbox from a snapshot (clone, fork,
	// restore in place) instead of its own state; see snapshots.go.
	Clone *CloneSpec
	// Network is the sandbox's egress policy and the secrets its egress
	// proxy injects (network.go); nil is the default policy.
	Network *NetworkSpec
}

// Instance is a running sandbox as its host reports it.
type Instance struct {
	// Address is the sandbox's IP; its agent listens on AgentPort there.
	Address string
	// MemoryRestored is true when the start brought the processes back
	// (a thaw or a restore), false for a cold boot from disk.
	MemoryRestored bool
	// RestoreFailure says why a start that had memory to restore (a
	// checkpoint) booted cold from disk instead; empty otherwise.
	RestoreFailure string
}

// AgentPort is where pt-agent listens inside every sandbox.
const AgentPort = 49983

// Config tunes the service.
type Config struct {
	// Admission queues starts while the host is busy (admission.go).
	Admission AdmissionConfig
	// DefaultWait bounds waits that ask for a state without a timeout.
	DefaultWait time.Duration
	// MaxWait caps any requested wait.
	MaxWait time.Duration
	// ProvisionTimeout bounds one background provisioning attempt
	// (template build excluded).
	ProvisionTimeout time.Duration
	// TemplateBuildTimeout bounds one template build.
	TemplateBuildTimeout time.Duration
	// TransitionDeadline is how long a sandbox may stay in a transitional
	// state (starting, stopping, archiving, …) before the periodic
	// reconciler drives it again; 0 means ProvisionTimeout plus a minute.
	TransitionDeadline time.Duration
	// PollInterval is the backstop poll of waits, covering writers this
	// process does not see (other API nodes).
	PollInterval time.Duration
	// WarmWindow is how long a stopped sandbox stays frozen in memory; a
	// start inside it thaws the processes. Past it the sandbox is stopped
	// disk-only.
	WarmWindow time.Duration
	// WarmBudgetMB bounds the RAM (by sandbox size) frozen sandboxes may
	// hold; the oldest are stopped disk-only beyond it.
	WarmBudgetMB int
	// TimerInterval is how often retention timers and TTLs are checked.
	TimerInterval time.Duration
	// Minute and Day are the units of the retention timers; tests shrink
	// them to run in seconds.
	Minute, Day time.Duration
	// DeletedRetention is how long a deleted record is kept before final
	// disposal (seed 004: 30 days).
	DeletedRetention time.Duration
	// PlatformRecoveryRetention keeps the record (and its archive or
	// backup) of a sandbox the platform deleted (seed 004: 90 days).
	PlatformRecoveryRetention time.Duration
	// TreeMaxSandboxes, TreeMaxCPU and TreeMaxRAMMB bound a tree of
	// sandboxes (a top-level one and its descendants): children count
	// against their ancestors' quotas. 0 disables a limit.
	TreeMaxSandboxes int
	TreeMaxCPU       float64
	TreeMaxRAMMB     int
	// OrgMaxSandboxes, OrgMaxCPU and OrgMaxRAMMB bound what one org's
	// active sandboxes (creating, restoring, starting, running, stopping)
	// use at once; an org's overrides (PUT /v1/orgs/{id}/quotas) win.
	// 0 disables a limit.
	OrgMaxSandboxes int
	OrgMaxCPU       float64
	OrgMaxRAMMB     int
	// Idempotency tunes Idempotency-Key handling (idempotency.go).
	Idempotency IdempotencyConfig
	// DefaultRuntime is the runtime class of sandboxes that do not ask.
	DefaultRuntime string
	// PlanMaxCPU and PlanMaxRAMMB are the per-sandbox plan limits: the
	// live-resize headroom every boot records.
	PlanMaxCPU   float64
	PlanMaxRAMMB int
	// DiskAutogrowMaxGB enables disk autogrow (seed 004's
	// limits.disk_autogrow_max_gb): a running sandbox whose disk passes 90%
	// grows by half, at least 10 GB, up to this size. 0 disables it.
	DiskAutogrowMaxGB int
	// ChunkGCInterval is how often unreferenced archive chunks are
	// collected (0 disables).
	ChunkGCInterval time.Duration
	// SandboxAPIURL is the API address sandboxes reach (the gateway
	// proxy); with a Sealer it gives every sandbox PT_API_URL and a
	// sandbox-scoped PT_TOKEN. Empty disables them.
	SandboxAPIURL string
	// Sealer encrypts secrets at rest; nil refuses secrets.
	Sealer Sealer
	// Preview signs preview tokens and renders preview URLs; nil when no
	// preview proxy runs (preview-URL requests are unavailable).
	Preview PreviewIssuer
	// Objects is where archives go; nil disables archiving.
	Objects objstore.Store
	// ArchiveBucket is the bucket archives are written to.
	ArchiveBucket string
	// ArtifactBucket is the bucket artifacts are written to (in Objects).
	ArtifactBucket string
	// ArtifactMaxBytes caps one artifact (0: no cap); a larger export
	// stores nothing and fails with ArtifactTooLargeError.
	ArtifactMaxBytes int64
	// Webhooks tunes webhook deliveries (webhooks.go).
	Webhooks WebhookConfig
	// Sessions tunes sessions, warm pools and workspaces (seed 000).
	Sessions SessionConfig
	// TTL tunes seed 003's lifetimes and statuses (ttl.go).
	TTL TTLConfig
	// Templates picks the default template and the session templates.
	Templates TemplateConfig
}

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{
		DefaultWait:               60 * time.Second,
		MaxWait:                   10 * time.Minute,
		ProvisionTimeout:          2 * time.Minute,
		TemplateBuildTimeout:      20 * time.Minute,
		PollInterval:              time.Second,
		WarmWindow:                10 * time.Minute,
		WarmBudgetMB:              8192,
		TimerInterval:             5 * time.Second,
		Minute:                    time.Minute,
		Day:                       24 * time.Hour,
		DeletedRetention:          30 * 24 * time.Hour,
		ArchiveBucket:             "platinum-archives",
		ArtifactBucket:            "platinum-artifacts",
		ArtifactMaxBytes:          5 << 30,
		Webhooks:                  DefaultWebhookConfig(),
		PlatformRecoveryRetention: 90 * 24 * time.Hour,
		PlanMaxCPU:                16,
		DefaultRuntime:            "runc",
		TreeMaxSandboxes:          50,
		TreeMaxCPU:                64,
		TreeMaxRAMMB:              128 * 1024,
		OrgMaxSandboxes:           100,
		OrgMaxCPU:                 256,
		OrgMaxRAMMB:               512 * 1024,
		Idempotency:               DefaultIdempotencyConfig(),
		ChunkGCInterval:           6 * time.Hour,
		PlanMaxRAMMB:              16384,
		Sessions:                  DefaultSessionConfig(),
		TTL:                       DefaultTTLConfig(),
		Admission:                 DefaultAdmissionConfig(),
		Templates:                 DefaultTemplateConfig(),
	}
}

// Service is the control plane. Create it with New and stop it with Close,
// which waits for every background operation it started.
type Service struct {
	cfg    Config
	store  store.Store
	host   Host
	log    *slog.Logger
	notify *notifier
	feed   *feed // wakes event subscribers (events.go)
	locks  keyedMutex
	tpl    *templates
	starts *admission // start slots of this host (admission.go)

	ctx    context.Context // cancelled by Close; parent of background work
	cancel context.CancelFunc
	wg     sync.WaitGroup

	agentMu sync.Mutex
	agents  map[string]*agentclient.Client

	// noAgentInit skips the agent /init call (unit tests with a fake host).
	noAgentInit bool

	// activity holds the last exec/file/preview time per sandbox; timers
	// read it before the stored LastActivityAt so hot paths never write.
	activityMu sync.Mutex
	activity   map[string]time.Time

	// progress holds long operations' progress by sandbox, for reads.
	progressMu sync.Mutex
	progress   map[string]sandbox.Progress

	// busy counts commands in flight per sandbox (status running).
	busy inflight

	// lastChunkGC is only touched by the timer loop.
	lastChunkGC time.Time

	// pools signals warm-pool refills and tracks preparations.
	pools *poolState

	// idem is the state of Idempotency-Key handling (idempotency.go).
	idem idemState
}

// New builds a Service. Call Reconcile once before serving requests.
func New(cfg Config, st store.Store, host Host, logger *slog.Logger) *Service {
	ctx, cancel := context.WithCancel(context.Background())
	fd := newFeed()
	s := &Service{
		cfg:      cfg,
		store:    feedStore{Store: st, feed: fd},
		feed:     fd,
		host:     host,
		log:      logger,
		notify:   newNotifier(),
		ctx:      ctx,
		cancel:   cancel,
		agents:   map[string]*agentclient.Client{},
		activity: map[string]time.Time{},
		progress: map[string]sandbox.Progress{},
		pools:    newPoolState(),
	}
	s.tpl = newTemplates(s)
	s.starts = newAdmission(cfg.Admission)
	return s
}

// Close stops background work and waits for it. Sandboxes keep running;
// the next start reconciles whatever was in flight.
func (s *Service) Close() {
	s.cancel()
	s.wg.Wait()
}

// goBackground runs fn on a goroutine owned by the service.
func (s *Service) goBackground(fn func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn(s.ctx)
	}()
}

// SkipAgentInit makes the service skip the agent /init call, for tests of
// transports with a fake host that runs no agent.
func (s *Service) SkipAgentInit() { s.noAgentInit = true }

// HostInfo describes a host: its runtime classes and what each supports.
type HostInfo struct {
	ID      string
	Gateway string
	Classes []ClassInfo
	// LXCFS is true when sandboxes see their own /proc/meminfo.
	LXCFS bool
}

// ClassInfo is one runtime class on a host.
type ClassInfo struct {
	Name string
	// StopKeepsMemory says how a stop keeps memory: "checkpoint" (to disk,
	// no RAM held) or "freeze" (in RAM, for the warm window).
	StopKeepsMemory string
	// Checkpoint is true when the class can write memory to disk
	// (runsc; runc only with CRIU >= 4.1); CheckpointReason says why not.
	Checkpoint       bool
	CheckpointReason string
}

// Hosts lists the hosts of the platform (one, for a single-host ptd).
func (s *Service) Hosts(ctx context.Context, p Principal) []HostInfo {
	return []HostInfo{s.host.Info()}
}
