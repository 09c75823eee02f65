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
	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/syncs"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// The host contract lives in internal/hostapi; these names keep the
// control plane's callers and fakes reading as before.
type (
	Host               = hostapi.Host
	StartSpec          = hostapi.StartSpec
	Instance           = hostapi.Instance
	HostInfo           = hostapi.HostInfo
	ClassInfo          = hostapi.ClassInfo
	NetworkSpec        = hostapi.NetworkSpec
	SecretSpec         = hostapi.SecretSpec
	NetworkSetter      = hostapi.NetworkSetter
	CloneSpec          = hostapi.CloneSpec
	SnapshotFiles      = hostapi.SnapshotFiles
	Snapshotter        = hostapi.Snapshotter
	CheckpointImporter = hostapi.CheckpointImporter
	Metrics            = hostapi.Metrics
	DiskUsageReader    = hostapi.DiskUsageReader
)

// AgentPort is where pt-agent listens inside every sandbox.
const AgentPort = hostapi.AgentPort

// AgentPath is where the pt-agent binary appears inside every sandbox.
const AgentPath = hostapi.AgentPath

// Config tunes the service.
type Config struct {
	// StopSnapshots backs up every stopped disk to Objects while another
	// host shares the store, so it may start there once this host is lost
	// (stopsnap.go).
	StopSnapshots bool
	// RelocateOnCapacity moves a start this host's admission refuses to
	// another host through the sandbox's stop snapshot (relocate.go);
	// RelocateGuard is how long a relocated sandbox stays put.
	RelocateOnCapacity bool
	RelocateGuard      time.Duration
	// Admission queues starts while the host is busy (admission.go).
	Admission AdmissionConfig
	// MinFreeBytes is the room the host's data dir keeps: creates and
	// uploads are refused with 507 below it (space.go; 0: no check).
	MinFreeBytes int64
	// BootSlots bounds the boots running at once on the host (boots.go):
	// a fixed bound, or with 0 one that adapts to how fast boots go,
	// from DefaultBootSlots of the machine's cores up to BootSlotsMax.
	BootSlots int
	// BootSlotsMax is the adaptive bound's ceiling (0: DefaultBootSlotsMax
	// of the machine's cores); set with BootSlots, that is its floor.
	BootSlotsMax int
	// SweepGrace is how long a deleted or failed record must have been
	// unchanged before the sweep (sweep.go) removes what its sandbox still
	// holds: its own teardown or cleanup may still be running until then.
	SweepGrace time.Duration
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
	// ReconcileWorkers bounds how many running sandboxes a reconciler
	// pass checks at once (each check asks the host's runtime).
	ReconcileWorkers int
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
	// disposal (30 days; docs/lifecycle.md, "After a delete").
	DeletedRetention time.Duration
	// PlatformRecoveryRetention keeps the record (and its archive or
	// backup) of a sandbox the platform deleted (90 days).
	PlatformRecoveryRetention time.Duration
	// TreeMaxSandboxes, TreeMaxCPU and TreeMaxRAMMB bound a tree of
	// sandboxes (a top-level one and its descendants): children count
	// against their ancestors' quotas. 0 disables a limit.
	TreeMaxSandboxes int
	TreeMaxCPU       float64
	TreeMaxRAMMB     int
	// Idempotency tunes Idempotency-Key handling (idempotency.go).
	Idempotency IdempotencyConfig
	// DefaultRuntime is the runtime class of sandboxes that do not ask.
	DefaultRuntime string
	// PlanMaxCPU and PlanMaxRAMMB are the per-sandbox plan limits: the
	// live-resize headroom every boot records.
	PlanMaxCPU   float64
	PlanMaxRAMMB int
	// DiskAutogrowMaxGB enables disk autogrow (docs/resize.md): a running
	// sandbox whose disk passes 90% grows by half, at least 10 GB, up to
	// this size. 0 disables it.
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
	// TTL tunes lifetimes and statuses (ttl.go, docs/lifecycle.md).
	TTL TTLConfig
	// Templates picks the default template and the session templates.
	Templates TemplateConfig
	// TemplateBuilds tunes custom template builds (custom_templates.go).
	TemplateBuilds TemplateBuildConfig
}

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{
		DefaultWait:               60 * time.Second,
		MinFreeBytes:              512 << 20,
		MaxWait:                   10 * time.Minute,
		ProvisionTimeout:          2 * time.Minute,
		ReconcileWorkers:          4,
		TemplateBuildTimeout:      20 * time.Minute,
		PollInterval:              time.Second,
		WarmWindow:                10 * time.Minute,
		WarmBudgetMB:              8192,
		TimerInterval:             5 * time.Second,
		Minute:                    time.Minute,
		Day:                       24 * time.Hour,
		DeletedRetention:          30 * 24 * time.Hour,
		ArchiveBucket:             "platinum-archives",
		PlatformRecoveryRetention: 90 * 24 * time.Hour,
		PlanMaxCPU:                16,
		DefaultRuntime:            "runc",
		TreeMaxSandboxes:          50,
		TreeMaxCPU:                64,
		TreeMaxRAMMB:              128 * 1024,
		Idempotency:               DefaultIdempotencyConfig(),
		ChunkGCInterval:           6 * time.Hour,
		PlanMaxRAMMB:              16384,
		TTL:                       DefaultTTLConfig(),
		Admission:                 DefaultAdmissionConfig(),
		SweepGrace:                30 * time.Second,
		Templates:                 DefaultTemplateConfig(),
		TemplateBuilds:            DefaultTemplateBuildConfig(),
	}
}

// Service is the control plane. Create it with New and stop it with Close,
// which waits for every background operation it started.
type Service struct {
	cfg    Config
	store  store.Store
	host   Host
	log    *slog.Logger
	notify *syncs.Notifier // wakes waiters on a sandbox or an idempotency key
	locks  syncs.KeyedMutex
	// tenancy resolves projects, issues sandbox tokens and checks org
	// quotas (internal/tenancy); cmd/ptd hands the same one to the
	// transports.
	tenancy *tenancy.Service
	tpl     *templates
	// tplCopies makes this host's copies of versions built elsewhere
	// (template_copies.go).
	tplCopies templateCopies
	builds    *builds    // custom template builds this process runs
	starts    *admission // start slots of this host (admission.go)
	boots     *bootGate  // boot slots of this host (boots.go)
	fenced    fenced     // sandboxes stopped while the store was out of reach (fence.go)
	// oomOnce starts reportOOM once (Reconcile).
	oomOnce sync.Once
	// provisioning holds the IDs of the creates a provision goroutine is
	// driving (queued for a boot slot or booting).
	provisioning sync.Map
	// relocations holds the IDs of the relocations to this host being
	// driven (relocate.go).
	relocations sync.Map

	bg *syncs.Group // background work; Close ends and waits for it

	agentMu sync.Mutex
	agents  map[string]*agentclient.Client
	// warmServes says whether the warm pool of a template and runtime
	// class ("" the default) serves creates (SetWarmPools); nil: every
	// pool does.
	warmServes func(ctx context.Context, template, runtime string) bool
	// warmDemand hears of each create a pool could serve (SetWarmDemand).
	warmDemand func(ctx context.Context, template, runtime string, warm bool)
	// claimOwner names this process in the warm claims it makes
	// (store.MetaPoolClaim), so one a crash left is known as such.
	claimOwner string

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
	busy syncs.InFlight[string]

	// hangups are owed to terminals a stop took away (terminal.go).
	hangups pendingHangups

	// lastChunkGC is only touched by the timer loop.
	lastChunkGC time.Time

	// idem is the state of Idempotency-Key handling (idempotency.go).
	idem idemState
}

// New builds a Service over st, driving host, with tn for what belongs to
// orgs (projects, tokens, quotas). Call Reconcile once before serving
// requests.
func New(cfg Config, st store.Store, host Host, tn *tenancy.Service, logger *slog.Logger) *Service {
	s := &Service{
		claimOwner: randomToken()[:16],
		cfg:        cfg,
		store:      st,
		host:       host,
		tenancy:    tn,
		log:        logger,
		notify:     &syncs.Notifier{},
		bg:         syncs.NewGroup(),
		agents:     map[string]*agentclient.Client{},
		activity:   map[string]time.Time{},
		progress:   map[string]sandbox.Progress{},
	}
	s.tpl = newTemplates(s)
	s.builds = newBuilds(cfg.TemplateBuilds.MaxConcurrent)
	s.starts = newAdmission(cfg.Admission)
	s.boots = newBootGate(cfg.BootSlots, cfg.BootSlotsMax, cfg.ProvisionTimeout/bootSlowFraction)
	return s
}

// Close stops background work and waits for it. Sandboxes keep running;
// the next start reconciles whatever was in flight.
func (s *Service) Close() { s.bg.Close() }

// lockIn takes sandbox id's lock and re-reads the sandbox, for the
// background half of a transition: between the request that queued the
// work and the work, another request or job may have moved the sandbox
// on, and the work applies only to one still in state want. When it is
// not (or cannot be read), ok is false and the lock is already released;
// otherwise the caller holds it until it calls unlock.
func (s *Service) lockIn(ctx context.Context, id string, want sandbox.State) (sb sandbox.Sandbox, unlock func(), ok bool) {
	unlock = s.locks.Lock(id)
	sb, err := s.store.GetSandbox(ctx, "", id)
	if err != nil || sb.State != want {
		unlock()
		return sandbox.Sandbox{}, nil, false
	}
	return sb, unlock, true
}

// SkipAgentInit makes the service skip the agent /init call, for tests of
// transports with a fake host that runs no agent.
func (s *Service) SkipAgentInit() { s.noAgentInit = true }

// Hosts lists this ptd's own host with its runtime details: one, or none
// for a ptd that runs no sandboxes (the registered hosts are HostRecords).
func (s *Service) Hosts(ctx context.Context, p Principal) []HostInfo {
	if !s.RunsSandboxes() {
		return nil
	}
	return []HostInfo{s.host.Info()}
}

// override sets *dst to *src when src is set: a request's optional field
// (a pointer) left out keeps the current value (a template's image
// settings, a sandbox's size).
func override[T any](dst, src *T) {
	if src != nil {
		*dst = *src
	}
}
