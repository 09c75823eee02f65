package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/host"
	"github.com/platinum-dev/platinum/internal/hostclaim"
	"github.com/platinum-dev/platinum/internal/hostjoin"
	"github.com/platinum-dev/platinum/internal/objstore/s3"
	"github.com/platinum-dev/platinum/internal/requestid"
	"github.com/platinum-dev/platinum/internal/sessions"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// config is everything `ptd serve` reads from flags and the environment.
type config struct {
	listen string
	// metricsListen, when set, serves /metrics without a token on a
	// listener of its own (the API listener's /metrics needs an admin token).
	metricsListen string
	dataDir       string
	// store is the metadata store: SQLite at a file path (default
	// <data-dir>/platinum.db) or PostgreSQL at a URL (see storeFlag).
	store    storeFlag
	logLevel string
	host     host.Config
	// objects is a directory for the local object store, unless s3 is set.
	objects string
	s3      s3.Config
	bucket  string
	// warmWindow overrides how long stopped sandboxes stay frozen;
	// warmBudgetMB how much sandbox RAM they may hold frozen at once.
	warmWindow   time.Duration
	warmBudgetMB int
	// recoveryRetention keeps platform-deleted records with an archive or
	// backup before final disposal.
	recoveryRetention time.Duration
	// region, hostHeartbeat and hostLostAfter are the host's registration
	// in the store (hosts.go).
	region                       string
	hostHeartbeat, hostLostAfter time.Duration
	// regionPeers are the other regions (--region-peer, regions.go).
	regionPeers regionPeers
	// hostFenceAfter is how long this host's heartbeats may fail before it
	// stops its sandboxes (negative: never; zero: half of hostLostAfter).
	hostFenceAfter time.Duration
	// advertiseURL is where the other ptd of a shared store reach this
	// one's API ("" means http://<listen address>).
	advertiseURL string
	// stopSnapshots backs up stopped disks while other hosts share the
	// store (controlplane.Config.StopSnapshots).
	stopSnapshots bool
	// relocate moves starts the admission queue refuses to another host
	// (controlplane.Config.RelocateOnCapacity), at most once per guard.
	relocate      bool
	relocateGuard time.Duration
	// role is "all" (API and sandboxes, the default), "api" (API only,
	// every sandbox on other ptd processes' hosts; docs/operating.md) or
	// "host" (sandboxes, the store reached through the ptd at join).
	role string
	// join is the URL of the platform's ptd a --role=host ptd joins;
	// hostToken the platform's host credential, which a joining host
	// presents and a ptd with a store accepts (internal/hostjoin).
	join, hostToken string
	// objectsSet says --objects or --s3-endpoint was given: a joined host
	// then keeps its own object store instead of the platform's.
	objectsSet bool
	// secretsKey and previewKey, when set, are the platform's keys a
	// joined host took (hostjoin.Info) instead of its data dir's.
	secretsKey, previewKey []byte
	// sshHostKey, when set, is the platform's SSH host key (OpenSSH PEM) a
	// joined host took; sshHostKeyFile (--ssh-host-key) names one.
	sshHostKey     []byte
	sshHostKeyFile string
	// timerInterval and deletedRetention make timers testable in seconds.
	timerInterval, deletedRetention time.Duration
	// defaultRuntime is the class of sandboxes that do not ask.
	defaultRuntime string
	// defaultTemplate is the template of creates that name none.
	defaultTemplate string
	// ttl tunes lifetimes (default, plan limits; docs/lifecycle.md).
	ttl controlplane.TTLConfig
	// admission is the start admission queue; hostCPURefusePct the CPU use
	// over which a host runs fewer starts at once.
	admission controlplane.AdmissionConfig
	// bootSlots bounds the boots running at once (0: adaptive, from two
	// per core up to bootSlotsMax, eight per core when 0);
	// reconcileInterval is how often the reconciler (and its sweep) runs.
	bootSlots         int
	bootSlotsMax      int
	reconcileInterval time.Duration
	hostCPURefusePct  float64
	// diskAutogrowMaxGB enables disk autogrow up to that size.
	diskAutogrowMaxGB int
	// orgMaxSandboxes, orgMaxCPU and orgMaxRAMMB are the per-org quotas
	// on active sandboxes (0: no limit).
	orgMaxSandboxes, orgMaxRAMMB int
	// minFreeMB is the room the data dir keeps: creates and uploads are
	// refused with 507 below it.
	minFreeMB int64
	orgMaxCPU float64
	// sandboxAPIPort is where sandboxes reach the API on their gateway
	// (0: no in-sandbox API).
	sandboxAPIPort uint16
	// webhookAllowPrivate lets webhooks reach loopback and private
	// addresses (tests); webhookRetryBase is the first retry's wait.
	webhookAllowPrivate bool
	webhookRetryBase    time.Duration
	// eventRetention is how long events are kept; artifactMaxBytes caps
	// one artifact.
	eventRetention   time.Duration
	artifactMaxBytes int64
	// pools are the warm-pool defaults; sessionTemplate is the template
	// of sessions that name none.
	pools           poolFlags
	sessionTemplate string
	// warmPoolBudgetMB caps the memory of this host's warm pools (0: no
	// cap; docs/sessions.md, "Demand-sized pools").
	warmPoolBudgetMB int
	// sessionStopTimeout bounds a session's stop: saving its workspace
	// (retried while the object store is down) and disposing of its sandbox.
	sessionStopTimeout time.Duration
	// previewListen is the preview proxy's address ("" disables it);
	// previewDomain the domain of host-form preview URLs.
	previewListen, previewDomain string
	// previewPublicURL, when set, is the platform-wide address preview
	// URLs name (scheme://domain[:port]) instead of this ptd's listener.
	previewPublicURL string
	// previewDomainSet says --preview-domain was given.
	previewDomainSet bool
	// sshListen is the SSH gateway's address ("" disables it).
	sshListen string
	// spareDisks is how many mounted disks of each size are kept ready.
	spareDisks int
	// mcpAllowDeleteAny lets /mcp's delete_sandbox delete sandboxes the
	// caller's token did not make through MCP.
	mcpAllowDeleteAny bool
	// builds tunes custom template builds (docs/templates.md).
	builds controlplane.TemplateBuildConfig
	// claimsDir is where this ptd claims its data dir, bridge, subnet and
	// cgroup parent against other ptd on the machine (internal/hostclaim).
	claimsDir string
}

// claim records what this ptd owns on the machine, failing when another
// live ptd owns any of it.
func (c config) claim() (*hostclaim.Held, error) {
	h, err := hostclaim.Acquire(c.claimsDir, hostclaim.Claim{DataDir: c.dataDir, Bridge: c.host.Network.Bridge,
		Subnet: c.host.Network.Subnet, CgroupParent: c.host.CgroupParent})
	if err != nil {
		return nil, fmt.Errorf("%w (see ptd serve -h; %s lists the running claims)", err, c.claimsDir)
	}
	return h, nil
}

// claimed parses the flags of the verb name, makes its logger and claims
// the host's data dir, bridge, subnet and cgroup parent for it: serve and
// reset both act on them, so neither may run beside a ptd that holds them.
// The caller releases the claim.
func claimed(name string, args []string) (config, *slog.Logger, *hostclaim.Held, error) {
	cfg, err := parseConfig(name, args)
	if err != nil {
		return config{}, nil, nil, err
	}
	log := cfg.logger()
	claim, err := cfg.claim()
	if err != nil {
		return config{}, nil, nil, err
	}
	return cfg, log, claim, nil
}

func parseConfig(name string, args []string) (config, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	c := config{pools: poolFlags{}, s3: s3.DefaultConfig()}
	fs.StringVar(&c.listen, "listen", "127.0.0.1:7070", "address of the HTTP API")
	fs.StringVar(&c.dataDir, "data-dir", "/var/lib/platinum", "directory holding the store, disks and sandboxes")
	storeArg := fs.String("store", "", "metadata store: a SQLite file (a path or sqlite://PATH; default <data-dir>/platinum.db) or PostgreSQL at a URL, postgres://USER@HOST:PORT/DB?sslmode=… (for several ptd processes sharing one control plane; give the password in PGPASSWORD or ~/.pgpass rather than the URL)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	def := host.DefaultConfig("")
	agent := fs.String("agent-binary", "", "pt-agent binary to inject (default: pt-agent next to ptd)")
	rt := fs.String("runtime-binary", def.RuntimeBinary, "OCI runtime binary for the runc class")
	cg := fs.String("cgroup-parent", def.CgroupParent, "parent cgroup of every sandbox's cgroup")
	pids := fs.Int64("pids-limit", def.PidsLimit, "maximum tasks per sandbox")
	cpuWeight := fs.Int("sandbox-cpu-weight", def.SandboxCPUWeight, "CPU weight (1-10000; a cgroup's default is 100) of --cgroup-parent, which holds every sandbox, so busy sandboxes cannot starve ptd's API of CPU (0 leaves the cgroup's weight alone)")
	fs.StringVar(&c.claimsDir, "claims-dir", hostclaim.DefaultDir, "machine-wide directory where every running ptd claims its data dir, bridge, subnet and cgroup parent; a ptd whose claim collides with a running one's refuses to start")
	fs.IntVar(&c.spareDisks, "spare-disks", 2, "sandbox disks of each recently used size kept formatted and mounted ahead of creates (0 disables)")
	cache := fs.String("template-cache", def.TemplateCacheDir, "cache of built template images, shared by data dirs")
	bridge := fs.String("bridge", def.Network.Bridge, "name of the sandbox bridge")
	subnet := fs.String("subnet", def.Network.Subnet.String(), "sandbox address pool (CIDR); the first address is the gateway")
	noEgress := fs.Bool("no-egress", false, "block all outbound traffic from sandboxes")
	egressPort := fs.Uint("egress-proxy-port", uint(def.Egress.ProxyPort), "port of the egress proxy (domain rules, secret injection) on the sandbox gateway; 0 turns it and the DNS filter off")
	egressDNS := fs.Uint("egress-dns-port", uint(def.Egress.DNSPort), "port of the filtering DNS resolver on the sandbox gateway")
	egressCA := fs.String("egress-upstream-ca", "", "PEM file of extra roots the egress proxy trusts for upstream TLS (added to the system roots)")
	egressHosts := fs.String("egress-hosts", "", "hosts-format file the egress proxy and DNS filter resolve names from before the system resolver")
	fs.StringVar(&c.objects, "objects", "", "directory of the local object store for archives (default <data-dir>/objects)")
	fs.StringVar(&c.s3.Endpoint, "s3-endpoint", "", "S3-compatible endpoint for archives instead of the local object store (keys from PT_S3_ACCESS_KEY, PT_S3_SECRET_KEY)")
	fs.StringVar(&c.s3.Region, "s3-region", c.s3.Region, "S3 signing region")
	fs.StringVar(&c.bucket, "archive-bucket", "platinum-archives", "bucket archives are written to")
	fs.DurationVar(&c.warmWindow, "warm-window", 10*time.Minute, "how long a stopped sandbox stays frozen in memory before it is stopped disk-only")
	sandboxAPI := fs.Bool("sandbox-api", true, "serve the API to sandboxes on their gateway address (same port as --listen), so agents inside can manage their own children with PT_API_URL and their sandbox-scoped PT_TOKEN")
	fs.StringVar(&c.defaultRuntime, "default-runtime", "", "runtime class of sandboxes that do not ask: runc or gvisor (default: gvisor when runsc runs sandboxes on this host, else runc)")
	cpDef := controlplane.DefaultConfig()
	tnDef := tenancy.DefaultConfig()
	fs.IntVar(&c.orgMaxSandboxes, "org-max-sandboxes", tnDef.OrgMaxSandboxes, "per-org limit on active sandboxes (creating, starting, running, stopping; 0: none); PUT /v1/orgs/{id}/quotas overrides it per org")
	fs.Float64Var(&c.orgMaxCPU, "org-max-cpu", tnDef.OrgMaxCPU, "per-org limit on the vCPUs of active sandboxes (0: none)")
	fs.IntVar(&c.orgMaxRAMMB, "org-max-ram-mb", tnDef.OrgMaxRAMMB, "per-org limit on the memory (MB) of active sandboxes (0: none)")
	fs.StringVar(&c.defaultTemplate, "default-template", "python-node", "template of creates that name neither a template nor a template_version_id")
	c.admission = cpDef.Admission
	fs.BoolVar(&c.admission.Queue, "start-admission-queue", c.admission.Queue, "queue starts while the host is busy instead of refusing them (docs/stop-start.md)")
	fs.IntVar(&c.admission.Slots, "start-admission-slots", c.admission.Slots, "starts run at once on this host")
	fs.IntVar(&c.admission.SlotsSaturated, "start-admission-slots-saturated", c.admission.SlotsSaturated, "starts run at once while the host's CPU is over --host-cpu-refuse-pct")
	fs.DurationVar(&c.admission.Wait, "start-admission-wait", c.admission.Wait, "longest wait for a start slot (a call's wait_timeout_ms, when shorter, wins); then 503 capacity")
	fs.IntVar(&c.admission.MaxQueue, "start-admission-max-queue", c.admission.MaxQueue, "starts that may wait for a slot; more are 503 capacity at once")
	fs.IntVar(&c.bootSlots, "boot-slots", 0, "sandboxes booting at once on this host (creates, starts, restores; 0: from two per core, growing while boots are fast up to --boot-slots-max); the others queue, and a boot's deadline starts when it gets its slot")
	fs.IntVar(&c.bootSlotsMax, "boot-slots-max", 0, "the most sandboxes booting at once while boots are fast (0: eight per core; with --boot-slots, which is then where it starts)")
	fs.DurationVar(&c.reconcileInterval, "reconcile-interval", 30*time.Second, "how often the reconciler checks running sandboxes and sweeps host resources no live sandbox owns")
	fs.Float64Var(&c.hostCPURefusePct, "host-cpu-refuse-pct", 90, "host CPU use (percent, over the last second or more) above which --start-admission-slots-saturated applies")
	c.ttl = controlplane.DefaultTTLConfig()
	fs.DurationVar(&c.ttl.Default, "default-ttl", c.ttl.Default, "TTL of python-node and node sandboxes created without ttl_ms or a retention field")
	fs.DurationVar(&c.ttl.MaxCreate, "max-create-ttl", c.ttl.MaxCreate, "plan limit of ttl_ms at create (more is sandbox_ttl_exceeded)")
	fs.DurationVar(&c.ttl.MaxSession, "max-session-ttl", c.ttl.MaxSession, "how long after its creation a TTL reset may make a sandbox expire")
	fs.DurationVar(&c.ttl.IdleAfter, "idle-after", c.ttl.IdleAfter, "how long a running sandbox without exec, file or preview traffic waits before its status is idle")
	fs.IntVar(&c.diskAutogrowMaxGB, "disk-autogrow-max-gb", 0, "grow a running sandbox's disk by half (at least 10 GB) when it passes 90% used, up to this size (0 disables)")
	fs.StringVar(&c.region, "region", "", "region of this ptd: its host registers in it (shown by GET /v1/hosts), and creates that name no region are made in it")
	fs.Var(&c.regionPeers, "region-peer", "another region NAME=URL (repeatable), URL any ptd of that region, which has its own store: creates naming it and requests for its sandboxes go there, and GET /v1/sandboxes merges its rows (needs --region)")
	fs.BoolVar(&c.stopSnapshots, "stop-snapshots", true, "on a PostgreSQL --store shared with other hosts, write each stopped sandbox's disk to the object store (a backup named pt:stop, replacing the previous one), so another host can start it if this one is lost")
	fs.BoolVar(&c.relocate, "start-relocate-on-capacity", true, "a start the host's start queue refuses moves the stopped sandbox to another host through its stop snapshot (202 code relocating) when it has one that holds its disk as it stopped; otherwise 503 capacity")
	fs.DurationVar(&c.relocateGuard, "start-relocate-guard", 10*time.Minute, "how long a relocated sandbox is not relocated again (its starts answer 503 capacity meanwhile)")
	fs.StringVar(&c.role, "role", "all", "all: serve the API and run sandboxes on this machine; api: serve the API only, forwarding every sandbox's requests and every create to the hosts of the other ptd processes on the same PostgreSQL --store or joined to it; host: run sandboxes (and serve the API) with the store of the ptd at --join")
	fs.StringVar(&c.join, "join", "", "with --role=host: URL of the platform's ptd to join (one started with --host-token); this host reaches the store, the secrets and preview keys and the object store through it, and needs no --store")
	fs.StringVar(&c.hostToken, "host-token", os.Getenv("PT_HOST_TOKEN"), "the platform's host credential (default $PT_HOST_TOKEN; prefer it, flags show in ps): a ptd with a --store lets hosts presenting it join (--role=host --join); a joining host presents it; at least 32 characters")
	fs.StringVar(&c.advertiseURL, "advertise-url", "", "URL at which the other ptd processes sharing this store reach this one's API, to forward it requests for its sandboxes and creates placed on its host (default http://<--listen address>)")
	fs.DurationVar(&c.hostHeartbeat, "host-heartbeat", 5*time.Second, "how often this ptd's host heartbeats its load to the store")
	fs.DurationVar(&c.hostLostAfter, "host-lost-after", 30*time.Second, "how long a registered host may miss heartbeats before it is marked lost")
	fs.DurationVar(&c.hostFenceAfter, "host-fence-after", 0, "how long this host's heartbeats may fail before it stops (fences) its sandboxes, so that none runs twice once the others mark it lost and recover them; shorter than --host-lost-after (default half of it on a PostgreSQL store; a SQLite store, one process's, never fences; negative never fences)")
	fs.DurationVar(&c.timerInterval, "timer-interval", 5*time.Second, "how often TTLs, retention timers and disposal are checked")
	fs.DurationVar(&c.deletedRetention, "deleted-retention", 30*24*time.Hour, "how long a user-deleted record is kept before final disposal")
	fs.DurationVar(&c.recoveryRetention, "platform-recovery-retention", cpDef.PlatformRecoveryRetention, "how long a platform-deleted record with a complete archive or backup (and that recovery data) is kept before final disposal")
	fs.IntVar(&c.warmBudgetMB, "warm-budget-mb", cpDef.WarmBudgetMB, "sandbox RAM (MB, by size) warm-stopped sandboxes may hold frozen at once; beyond it the oldest are stopped disk-only")
	fs.BoolVar(&c.webhookAllowPrivate, "webhook-allow-private", false, "let webhook URLs reach loopback, private and shared (100.64/10) addresses; link-local (metadata) stays refused. For tests and closed networks only")
	fs.DurationVar(&c.webhookRetryBase, "webhook-retry-base", 2*time.Second, "wait before a failed webhook delivery's first retry; it doubles after each failure (capped at one hour, 12 attempts)")
	fs.DurationVar(&c.eventRetention, "event-retention", 30*24*time.Hour, "how long events are kept (0: forever); pending webhook deliveries' events and live sandboxes' usage history are kept regardless")
	fs.Int64Var(&c.artifactMaxBytes, "artifact-max-bytes", 5<<30, "largest artifact an export may store (0: no cap); larger is 413 artifact_too_large")
	fs.StringVar(&c.sshListen, "ssh-listen", "127.0.0.1:2222", "address of the SSH gateway (ssh SANDBOX_ID@host, keys from ssh_keys; empty disables it)")
	fs.StringVar(&c.sshHostKeyFile, "ssh-host-key", "", "the SSH gateway's host key file (made if missing), for ptds that share a store to show clients one key; default: the data dir's own, or the platform's on a joined host")
	fs.StringVar(&c.metricsListen, "metrics-listen", "", "address of a listener serving only Prometheus /metrics, without a token (empty: /metrics only on --listen, for platform admin tokens)")
	fs.StringVar(&c.previewListen, "preview-listen", "127.0.0.1:7071", "address of the preview proxy serving sandbox ports (empty disables it)")
	fs.StringVar(&c.previewDomain, "preview-domain", "localhost", "domain of preview URLs: <port>-<sandbox id>.<domain> must resolve to the preview listener")
	fs.StringVar(&c.previewPublicURL, "preview-public-url", "", "platform-wide address preview URLs name, scheme://domain[:port] (e.g. a load balancer in front of every ptd's preview listener; any ptd of the store serves every sandbox's previews): sets the preview domain; default http://<--preview-domain>:<--preview-listen port>")
	fs.Var(c.pools, "warm-pool", "warm pool default TEMPLATE[@CLASS]=MIN_READY[:MAX[:auto]] (repeatable; without @CLASS the default runtime class; :auto sizes it from demand between MIN_READY and MAX); PUT /v1/pools/{template} overrides it")
	fs.IntVar(&c.warmPoolBudgetMB, "warm-pool-budget-mb", 0, "most memory (MiB, members' ram_mb) all warm pools' targets may hold on this host; targets are cut to fit, the largest pool's demand-sized part first (0: no cap)")
	fs.BoolVar(&c.mcpAllowDeleteAny, "mcp-allow-delete-any", false, "let /mcp's delete_sandbox tool delete sandboxes the caller's token did not make through MCP (docs/mcp.md)")
	fs.Int64Var(&c.minFreeMB, "min-free-mb", controlplane.DefaultConfig().MinFreeBytes>>20, "free space (MiB) the data dir's filesystem keeps: below it creates and uploads are refused with 507 no_space before anything is made (0: no check)")
	fs.StringVar(&c.sessionTemplate, "session-template", "", "template of sessions that name none (default: --default-template)")
	c.builds = cpDef.TemplateBuilds
	fs.Float64Var(&c.builds.CPU, "template-build-cpu", c.builds.CPU, "vCPUs of each template build sandbox (Dockerfile RUN steps run there)")
	fs.IntVar(&c.builds.RAMMB, "template-build-ram-mb", c.builds.RAMMB, "memory (MB) of each template build sandbox")
	fs.IntVar(&c.builds.DiskGB, "template-build-disk-gb", c.builds.DiskGB, "disk (GB) of each template build sandbox")
	fs.DurationVar(&c.builds.Timeout, "template-build-timeout", c.builds.Timeout, "longest a custom template build may run (a request's timeout_seconds may ask for less)")
	fs.IntVar(&c.builds.MaxConcurrent, "template-builds", c.builds.MaxConcurrent, "custom template builds that run at once; more wait for a slot")
	fs.Int64Var(&c.builds.ContextMaxBytes, "template-context-max-bytes", c.builds.ContextMaxBytes, "largest build context a Dockerfile build may upload (larger is 413 upload_too_large)")
	fs.Int64Var(&c.builds.ImageMaxBytes, "template-image-max-bytes", c.builds.ImageMaxBytes, "largest image tarball that may be uploaded (larger is 413 upload_too_large)")
	imagePrivate := fs.Bool("image-registry-allow-private", false, "let template builds pull from registries on loopback, private and link-local addresses (tests and closed networks only)")
	fs.DurationVar(&c.sessionStopTimeout, "session-stop-timeout", sessions.DefaultConfig().StopTimeout,
		"bound on a session's stop; its workspace save is retried for three quarters of it while the object store is down, then the sandbox is kept stopped")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	fs.Visit(func(f *flag.Flag) {
		c.previewDomainSet = c.previewDomainSet || f.Name == "preview-domain"
		c.objectsSet = c.objectsSet || f.Name == "objects" || f.Name == "s3-endpoint"
	})
	abs, err := filepath.Abs(c.dataDir)
	if err != nil {
		return c, err
	}
	c.dataDir = abs
	if c.store, err = parseStore(*storeArg, abs); err != nil {
		return c, err
	}
	if c.hostToken != "" {
		if err := hostjoin.CheckToken(c.hostToken); err != nil {
			return c, err
		}
	}
	switch {
	case c.role != "all" && c.role != "api" && c.role != "host":
		return c, fmt.Errorf("--role must be all, api or host, not %q", c.role)
	case c.role == "host" && (c.join == "" || c.hostToken == ""):
		return c, fmt.Errorf("--role=host needs --join URL (the platform's ptd) and --host-token (or PT_HOST_TOKEN)")
	case c.role == "host" && *storeArg != "":
		return c, fmt.Errorf("--role=host takes its store from --join: drop --store, or run --role=all with it")
	case c.join != "" && c.role != "host":
		return c, fmt.Errorf("--join needs --role=host")
	case c.warmPoolBudgetMB < 0:
		return c, fmt.Errorf("--warm-pool-budget-mb must be 0 (no cap) or more")
	case c.role == "api" && c.store.kind != "postgres" && c.hostToken == "":
		return c, fmt.Errorf("--role=api needs --store postgres://… (its sandboxes run on the hosts of the other ptd processes sharing that store) or --host-token (hosts join it)")
	}
	if c.role == "host" {
		if u, err := url.Parse(c.join); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, fmt.Errorf("--join %q: want the platform ptd's URL, http(s)://HOST:PORT", c.join)
		}
		c.store = storeFlag{kind: "remote", target: strings.TrimSuffix(c.join, "/")}
	}
	if err := validateRegions(c.region, c.regionPeers); err != nil {
		return c, err
	}
	c.host = host.DefaultConfig(abs)
	c.host.AgentBinary, c.host.RuntimeBinary, c.host.CgroupParent = *agent, *rt, *cg
	c.host.PidsLimit, c.host.TemplateCacheDir, c.host.SandboxCPUWeight = *pids, *cache, *cpuWeight
	c.host.Network.Bridge = *bridge
	c.host.Images.AllowPrivate = *imagePrivate
	if c.host.Network.Subnet, err = netip.ParsePrefix(*subnet); err != nil {
		return c, fmt.Errorf("--subnet: %w", err)
	}
	c.host.Network.Egress = !*noEgress
	if *egressPort > 65535 || *egressDNS > 65535 {
		return c, fmt.Errorf("--egress-proxy-port and --egress-dns-port must be ports")
	}
	c.host.Egress.ProxyPort, c.host.Egress.DNSPort = uint16(*egressPort), uint16(*egressDNS)
	c.host.Egress.UpstreamCAFile, c.host.Egress.HostsFile = *egressCA, *egressHosts
	if *sandboxAPI {
		_, port, err := net.SplitHostPort(c.listen)
		if err != nil {
			return c, fmt.Errorf("--listen: %w", err)
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p == 0 {
			return c, fmt.Errorf("--listen needs a fixed port for --sandbox-api")
		}
		c.sandboxAPIPort = uint16(p)
		c.host.Network.GatewayPorts = []uint16{c.sandboxAPIPort}
	}
	if c.objects == "" {
		c.objects = filepath.Join(abs, "objects")
	}
	c.s3.AccessKey, c.s3.SecretKey, c.s3.PathStyle = os.Getenv("PT_S3_ACCESS_KEY"), os.Getenv("PT_S3_SECRET_KEY"), true
	if err := c.host.Network.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// shared reports whether other ptd processes may drive sandboxes through
// this one's store: a PostgreSQL store, a joined host's, or one that lets
// hosts join (--host-token). Only then do cross-host layers run (relays,
// fencing, stop snapshots; docs/ARCHITECTURE.md, "Many hosts").
func (c config) shared() bool { return c.store.kind != "sqlite" || c.hostToken != "" }

// applyJoin takes what the platform told a joining host: its region (which
// an explicit --region must match), its keys, and its object store unless
// this host was given its own.
func (c *config) applyJoin(info hostjoin.Info) error {
	switch {
	case c.region == "":
		c.region = info.Region
	case c.region != info.Region:
		return fmt.Errorf("--region %q, but the platform at --join is region %q: drop --region or join that region's ptd", c.region, info.Region)
	}
	c.secretsKey, c.previewKey, c.sshHostKey = info.SecretsKey, info.PreviewKey, info.SSHHostKey
	if !c.objectsSet {
		o := info.Objects
		c.s3.Endpoint, c.s3.AccessKey, c.s3.SecretKey = o.Endpoint, o.AccessKey, o.SecretKey
		if o.Region != "" {
			c.s3.Region = o.Region
		}
		if o.Dir != "" {
			c.objects = o.Dir
		}
		c.bucket = o.Bucket
	}
	return nil
}

// joinInfo is what this ptd tells hosts joining it (see applyJoin).
func (c config) joinInfo(secretsKey, previewKey, sshHostKey []byte) hostjoin.Info {
	o := hostjoin.Objects{Dir: c.objects, Bucket: c.bucket}
	if c.s3.Endpoint != "" {
		o = hostjoin.Objects{Endpoint: c.s3.Endpoint, Region: c.s3.Region, AccessKey: c.s3.AccessKey, SecretKey: c.s3.SecretKey, Bucket: c.bucket}
	}
	return hostjoin.Info{Region: c.region, SecretsKey: secretsKey, PreviewKey: previewKey, SSHHostKey: sshHostKey, Objects: o}
}

func (c config) logger() *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		lvl = slog.LevelInfo
	}
	// Lines logged for a request carry its request_id (X-Request-Id).
	return slog.New(requestid.NewLogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})))
}
