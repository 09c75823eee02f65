package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/platinum-dev/platinum/internal/artifacts"
	"github.com/platinum-dev/platinum/internal/compat/daytona"
	"github.com/platinum-dev/platinum/internal/compat/e2b"
	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/dashboard"
	"github.com/platinum-dev/platinum/internal/events"
	"github.com/platinum-dev/platinum/internal/forward"
	"github.com/platinum-dev/platinum/internal/host"
	"github.com/platinum-dev/platinum/internal/hostapi/nohost"
	"github.com/platinum-dev/platinum/internal/hostjoin"
	"github.com/platinum-dev/platinum/internal/httpapi"
	"github.com/platinum-dev/platinum/internal/metrics"
	"github.com/platinum-dev/platinum/internal/objstore"
	objfs "github.com/platinum-dev/platinum/internal/objstore/fs"
	"github.com/platinum-dev/platinum/internal/objstore/s3"
	"github.com/platinum-dev/platinum/internal/preview"
	"github.com/platinum-dev/platinum/internal/region"
	"github.com/platinum-dev/platinum/internal/requestid"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/secrets"
	"github.com/platinum-dev/platinum/internal/sessions"
	"github.com/platinum-dev/platinum/internal/sshgw"
	"github.com/platinum-dev/platinum/internal/tenancy"
	"github.com/platinum-dev/platinum/mcpserver"
	"github.com/platinum-dev/platinum/web"
)

func serve(ctx context.Context, args []string) error {
	cfg, log, claim, err := claimed("ptd serve", args)
	if err != nil {
		return err
	}
	defer claim.Release()
	if err := os.MkdirAll(cfg.dataDir, 0o700); err != nil {
		return err
	}
	if cfg.store.kind == "remote" {
		// A joined host takes the platform's region, keys and object
		// store before anything uses them (docs/ARCHITECTURE.md, "Joined
		// hosts").
		info, err := hostjoin.Fetch(ctx, cfg.join, cfg.hostToken, log.With("component", "join"))
		if err != nil {
			return err
		}
		if err := cfg.applyJoin(info); err != nil {
			return err
		}
	}
	st, err := openStore(ctx, cfg.store, cfg.hostToken, log)
	if err != nil {
		return err
	}
	defer st.Close()
	// The platform's keys, checked against the store before anything on
	// this machine is touched: a ptd refused for a key not the platform's
	// leaves nothing behind (docs/ARCHITECTURE.md, "Platform keys").
	key, err := platformKey(ctx, cfg, st, cfg.secretsKey, "secrets.key")
	if err != nil {
		return err
	}
	var previewKey []byte
	if cfg.previewListen != "" {
		if previewKey, err = platformKey(ctx, cfg, st, cfg.previewKey, "preview.key"); err != nil {
			return fmt.Errorf("preview key: %w", err)
		}
	}
	// The host this ptd runs sandboxes on; an api-only ptd has none (h
	// nil) and its control plane a host that runs nothing.
	var h *host.Host
	var hst controlplane.Host
	if cfg.role == "api" {
		// Named afresh at each start: nothing is placed on it or kept
		// under its name.
		hst = nohost.New(sandbox.NewID("api_"))
	} else {
		if h, err = host.Open(ctx, cfg.host, log); err != nil {
			return err
		}
		if err := h.KeepSpareDisks(ctx, cfg.spareDisks, sandbox.DefaultDisk); err != nil {
			return err
		}
		if cfg.defaultRuntime, err = defaultRuntime(ctx, cfg.defaultRuntime, h, log); err != nil {
			return err
		}
		hst = h
	}
	cpCfg := controlplane.DefaultConfig()
	cpCfg.WarmWindow, cpCfg.ArchiveBucket = cfg.warmWindow, cfg.bucket
	cpCfg.TimerInterval, cpCfg.DeletedRetention = cfg.timerInterval, cfg.deletedRetention
	cpCfg.WarmBudgetMB, cpCfg.PlatformRecoveryRetention = cfg.warmBudgetMB, cfg.recoveryRetention
	cpCfg.DiskAutogrowMaxGB, cpCfg.DefaultRuntime = cfg.diskAutogrowMaxGB, cfg.defaultRuntime
	cpCfg.Templates.Default = cfg.defaultTemplate
	cpCfg.TemplateBuilds = cfg.builds
	cpCfg.TTL = cfg.ttl
	cpCfg.Admission = cfg.admission
	cpCfg.BootSlots, cpCfg.BootSlotsMax = cfg.bootSlots, cfg.bootSlotsMax
	load := &host.CPULoad{}
	cpCfg.Admission.HostBusy = func() bool { return load.Over(cfg.hostCPURefusePct) }
	if cpCfg.Objects, err = openObjects(cfg); err != nil {
		return err
	}
	if cpCfg.Sealer, err = secrets.New(key); err != nil {
		return err
	}
	if h == nil {
		// Sandboxes reach their own host's ptd. Its preview proxy and SSH
		// gateway relay every sandbox's traffic to its host's ptd.
		cfg.sandboxAPIPort = 0
	}
	if cfg.sandboxAPIPort != 0 {
		cpCfg.SandboxAPIURL = "http://" + net.JoinHostPort(h.Gateway().String(), strconv.Itoa(int(cfg.sandboxAPIPort)))
	}
	pv, err := openPreview(cfg, previewKey)
	if err != nil {
		return err
	}
	if pv != nil {
		cpCfg.Preview = preview.NewIssuer(pv.cfg, pv.signer)
	}
	cpCfg.MinFreeBytes = cfg.minFreeMB << 20
	cpCfg.StopSnapshots = cfg.stopSnapshots && cfg.shared() && h != nil
	cpCfg.RelocateOnCapacity, cpCfg.RelocateGuard = cfg.relocate && cpCfg.StopSnapshots, cfg.relocateGuard
	// The control plane's parts (docs/ARCHITECTURE.md): tenancy below the
	// core, the core, events, artifacts and sessions beside it, and the
	// transports over them. Every part writes through the feed-wrapped
	// store, so a commit anywhere wakes the event readers.
	feed := &events.Feed{}
	if l, ok := st.(interface {
		ListenEvents(context.Context, func())
	}); ok {
		// Commits of other ptd processes sharing the store wake this
		// one's event readers and webhook dispatcher too.
		go l.ListenEvents(ctx, feed.Notify)
	}
	st = feed.Wrap(st)
	evCfg := events.DefaultConfig()
	evCfg.Sealer, evCfg.AllowPrivate, evCfg.RetryBase = cpCfg.Sealer, cfg.webhookAllowPrivate, cfg.webhookRetryBase
	evCfg.EventRetention = cfg.eventRetention
	ev := events.New(evCfg, st, feed, log.With("component", "events"))
	defer ev.Close()
	tn := tenancy.New(tenancy.Config{OrgMaxSandboxes: cfg.orgMaxSandboxes, OrgMaxCPU: cfg.orgMaxCPU, OrgMaxRAMMB: cfg.orgMaxRAMMB},
		st, log.With("component", "tenancy"))
	cp := controlplane.New(cpCfg, st, hst, tn, log)
	defer cp.Close()
	if err := bootstrapToken(ctx, tn, cfg.dataDir); err != nil {
		return err
	}
	started := time.Now()
	if err := cp.Reconcile(ctx); err != nil {
		return err
	}
	artCfg := artifacts.DefaultConfig()
	artCfg.Objects, artCfg.MaxBytes = cpCfg.Objects, cfg.artifactMaxBytes
	art := artifacts.New(artCfg, st, cp, log.With("component", "artifacts"))
	defer art.Close()
	art.Sweep(ctx, started) // what a crash left of exports
	sesCfg := sessions.DefaultConfig()
	sesCfg.Pools, sesCfg.DefaultTemplate = cfg.pools, cfg.sessionTemplate
	sesCfg.PoolBudgetMB = cfg.warmPoolBudgetMB
	sesCfg.StopTimeout, sesCfg.Objects = cfg.sessionStopTimeout, cpCfg.Objects
	ses := sessions.New(sesCfg, st, cp, tn, log.With("component", "sessions"))
	cp.SetWarmPools(ses.PoolServes)
	cp.SetWarmDemand(ses.WarmDemand)
	defer ses.Close() // before the core's: its work drives the core
	cp.RunReconciler(ctx, cfg.reconcileInterval)
	cp.FollowRelocations(ctx, feed.Wake)
	cp.RunTimers(ctx)
	ev.Run(ctx)
	if h != nil {
		// Pools and sessions are kept by the ptd processes of hosts.
		if err := ses.Run(ctx); err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	e2bCfg := e2b.DefaultConfig()
	errc := make(chan error, 4)
	// With other hosts on the store, a request for one of their sandboxes
	// goes to their ptd and creates are placed across hosts
	// (docs/ARCHITECTURE.md, "Many hosts").
	fwd := forward.New(st, hst.ID(), h != nil, log.With("component", "forward"))
	// A ptd on SQLite that lets no host join is alone: its preview proxy
	// and SSH gateway have no relaying layer at all.
	shared := cfg.shared()
	var ps *preview.Server
	var gw *sshgw.Server
	if pv != nil {
		ps, err = preview.New(pv.cfg, pv.signer, cp, log.With("component", "preview"))
		if err != nil {
			return err
		}
		if shared {
			ps.SetPeers(fwd)
		}
		e2bCfg.Ports = ps // E2B's E2b-Sandbox-Port traffic goes through the preview proxy
		pctx, stop := context.WithCancel(ctx)
		pdone := make(chan struct{})
		defer func() { stop(); <-pdone }()
		go func() {
			defer close(pdone)
			if err := ps.Serve(pctx, pv.ln); err != nil {
				errc <- fmt.Errorf("preview proxy: %w", err)
			}
		}()
		log.Info("preview proxy ready", "listen", pv.ln.Addr().String(), "domain", pv.cfg.Domain)
	}
	var sshHostKey []byte // the host key clients see, for hosts joining
	if cfg.sshListen != "" {
		// The SSH gateway (docs/terminal.md); its host key persists so
		// clients' known_hosts stay valid across restarts.
		hostKey, relayKey, pem, err := sshKeys(cfg)
		if err != nil {
			return err
		}
		sshHostKey = pem
		sshLn, err := net.Listen("tcp", cfg.sshListen)
		if err != nil {
			return fmt.Errorf("ssh listener: %w", err)
		}
		gw = sshgw.New(cp, hostKey, log.With("component", "ssh"))
		if shared {
			gw.SetPeers(fwd, st, hst.ID(), relayKey)
		}
		sctx, stop := context.WithCancel(ctx)
		sdone := make(chan struct{})
		defer func() { stop(); <-sdone }()
		go func() {
			defer close(sdone)
			if err := gw.Serve(sctx, sshLn); err != nil {
				errc <- fmt.Errorf("ssh gateway: %w", err)
			}
		}()
		log.Info("ssh gateway ready", "listen", sshLn.Addr().String(), "fingerprint", ssh.FingerprintSHA256(hostKey.PublicKey()))
	}
	api := httpapi.New(httpapi.Deps{Sandboxes: cp, Tenancy: tn, Events: ev, Artifacts: art, Sessions: ses,
		Region: cfg.region, Regions: regionNames(cfg.region, cfg.regionPeers)}, log)
	// Other regions, each with its own store, are reached through one of
	// their ptds (docs/ARCHITECTURE.md, "Regions"); in front of forwarding,
	// so a request for another region never reaches this one's hosts.
	// E2B's and Daytona's sandbox lists are merged across regions as
	// /v1's is, and a Daytona create's target names its region.
	rt := region.New(cfg.region, cfg.regionPeers, st, log.With("component", "region"))
	rt.AddLists(e2b.RegionLists()...)
	rt.AddLists(daytona.RegionLists()...)
	rt.AddCreates(daytona.RegionCreates()...)
	// MCP (Streamable HTTP) at /mcp: its tools call /v1 in-process with the
	// caller's token (docs/mcp.md), through the regions as /v1's callers.
	mcpH := mcpserver.NewHTTPHandler(mcpserver.HTTPOptions{
		API:            rt.Wrap(fwd.Wrap(api)),
		AllowDeleteAny: cfg.mcpAllowDeleteAny,
		Logger:         log.With("component", "mcp"),
		Authenticate: func(ctx context.Context, tok string) (string, error) {
			p, err := tn.Authenticate(ctx, tok)
			if errors.Is(err, sandbox.ErrUnauthenticated) {
				return "", fmt.Errorf("%w: %w", mcpserver.ErrUnauthenticated, err)
			}
			return p.TokenID, err
		},
	})
	// Compatibility surfaces share the listener: /daytona/ (docs/daytona.md),
	// then E2B's paths and envd traffic, then the dashboard's own paths
	// (/, /assets/, docs/dashboard.md), then /v1.
	site := dashboard.Mount(api, web.Dist())
	rest := daytona.Mount(e2b.MountConfig(site, cp, tn, e2bCfg, log), cp, tn, daytonaConfig(cfg.region), log.With("component", "daytona"))
	var root http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mcp" {
			mcpH.ServeHTTP(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	})
	root = rt.Wrap(fwd.Wrap(root))
	// The request id and the metrics wrap every surface: /v1, E2B's,
	// Daytona's and /mcp.
	instrument := func(h http.Handler) http.Handler {
		return requestid.Middleware(metrics.InstrumentLog(log.With("component", "http"), h))
	}
	front := root
	if shared {
		// What the preview proxies and SSH gateways of the other ptd
		// processes relay to this one's (docs/ARCHITECTURE.md, "Many
		// hosts"); on the API listener only, never the sandboxes'.
		front = peerRelays(root, ps, gw)
	}
	if cfg.hostToken != "" && cfg.store.kind != "remote" {
		// Hosts join through this ptd and reach its store (docs/
		// ARCHITECTURE.md, "Joined hosts"); on the API listener only.
		front = serveHosts(front, cfg.joinInfo(key, previewKey, sshHostKey), st, feed, cfg.hostToken, log.With("component", "hosts"))
	}
	// h2c beside HTTP/1.1: peers relay gRPC previews here over HTTP/2
	// (docs/ARCHITECTURE.md, "Many hosts").
	srv := &http.Server{Handler: instrument(front), ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	srv.RegisterOnShutdown(api.Shutdown) // event streams never end on their own
	srv.RegisterOnShutdown(mcpH.Shutdown)
	// Every listener is bound before the host registers and the API
	// answers (health included): a port another process holds stops the
	// start here, not an instant after ptd said it was healthy.
	var mln, sln net.Listener
	if cfg.metricsListen != "" {
		if mln, err = net.Listen("tcp", cfg.metricsListen); err != nil {
			return fmt.Errorf("metrics listener: %w", err)
		}
		defer mln.Close()
	}
	if cfg.sandboxAPIPort != 0 {
		// Sandboxes reach the API only here, on their gateway (the
		// firewall opens just this port to them).
		if sln, err = net.Listen("tcp", strings.TrimPrefix(cpCfg.SandboxAPIURL, "http://")); err != nil {
			return fmt.Errorf("sandbox API listener: %w", err)
		}
		defer sln.Close()
	}
	// The host is registered before the API answers, so a ptd that
	// answers is one its peers can see.
	if h != nil {
		self := cmp.Or(cfg.advertiseURL, "http://"+ln.Addr().String())
		if err := runHostRegistry(ctx, cfg, st, h, cp, self, log); err != nil {
			return err
		}
	} else {
		watchHosts(ctx, cfg, st, hst.ID(), true, cp, log.With("component", "hosts"))
	}
	go func() { errc <- srv.Serve(ln) }()
	if mln != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", api.MetricsHandler())
		msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		defer msrv.Close()
		go func() { errc <- msrv.Serve(mln) }()
		log.Info("metrics ready", "listen", mln.Addr().String())
	}
	var ssrv *http.Server
	if sln != nil {
		// A server of its own: the relays of peerRelays are not theirs.
		ssrv = &http.Server{Handler: instrument(root), ReadHeaderTimeout: 10 * time.Second}
		ssrv.RegisterOnShutdown(api.Shutdown)
		defer ssrv.Close()
		go func() { errc <- ssrv.Serve(sln) }()
	}
	log.Info("ptd ready", "listen", ln.Addr().String(), "data_dir", cfg.dataDir, "store", cfg.store.String(), "role", cfg.role, "host", hst.ID())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("ptd shutting down; sandboxes keep running")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if ssrv != nil {
		ssrv.Shutdown(sctx)
	}
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// peerRelays serves, in front of next, what another ptd of the store
// relays here for a sandbox of this host: preview requests (marked
// preview.HeaderRelay) go to the preview proxy, which checks their token
// as on its own listener, and SSH connections (sshgw.RelayPath) to the
// gateway, which checks the relaying ptd's key and the client's.
func peerRelays(next http.Handler, ps *preview.Server, gw *sshgw.Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get(preview.HeaderRelay) != "":
			if ps == nil {
				forward.WriteError(w, r, "unavailable", "this ptd runs no preview proxy (--preview-listen is empty)", nil)
				return
			}
			ps.ServeHTTP(w, r)
		case r.URL.Path == sshgw.RelayPath:
			if gw == nil {
				forward.WriteError(w, r, "unavailable", "this ptd runs no SSH gateway (--ssh-listen is empty)", nil)
				return
			}
			gw.ServeRelay(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// previewSetup is the preview proxy's listener, config and signer, made
// before the control plane (which issues its URLs).
type previewSetup struct {
	ln     net.Listener
	cfg    preview.Config
	signer *preview.Signer
}

// openPreview listens for the preview proxy, which signs with key (the
// platform's preview.key, platformKey); nil when --preview-listen is
// empty.
func openPreview(cfg config, key []byte) (*previewSetup, error) {
	if cfg.previewListen == "" {
		return nil, nil
	}
	signer, err := preview.NewSigner(key)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.previewListen)
	if err != nil {
		return nil, fmt.Errorf("preview listener: %w", err)
	}
	pc := preview.DefaultConfig()
	pc.Domain, pc.URLPort = cfg.previewDomain, ln.Addr().(*net.TCPAddr).Port
	if cfg.previewPublicURL != "" {
		if err := previewPublicURL(&pc, cfg.previewPublicURL, cfg.previewDomainSet); err != nil {
			ln.Close()
			return nil, err
		}
	}
	if err := pc.Validate(); err != nil {
		ln.Close()
		return nil, err
	}
	return &previewSetup{ln: ln, cfg: pc, signer: signer}, nil
}

// sshKeys are the SSH gateway's keys: the host key clients see (the
// --ssh-host-key file, else the platform's on a joined host, else the
// relay key) with its OpenSSH PEM, and the relay key, always the data
// dir's own, which tells this ptd's gateway apart from its peers' on
// relays (docs/ARCHITECTURE.md, "Many hosts").
func sshKeys(cfg config) (host, relay ssh.Signer, pem []byte, err error) {
	own := filepath.Join(cfg.dataDir, "ssh_host_ed25519_key")
	if relay, err = sshgw.LoadOrCreateHostKey(own); err != nil {
		return nil, nil, nil, fmt.Errorf("ssh host key: %w", err)
	}
	switch {
	case cfg.sshHostKeyFile != "":
		if host, err = sshgw.LoadOrCreateHostKey(cfg.sshHostKeyFile); err != nil {
			return nil, nil, nil, fmt.Errorf("--ssh-host-key: %w", err)
		}
		pem, err = os.ReadFile(cfg.sshHostKeyFile)
	case cfg.sshHostKey != nil:
		pem = cfg.sshHostKey
		if host, err = ssh.ParsePrivateKey(pem); err != nil {
			return nil, nil, nil, fmt.Errorf("the platform's SSH host key: %w", err)
		}
	default:
		host = relay
		pem, err = os.ReadFile(own)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("ssh host key: %w", err)
	}
	return host, relay, pem, nil
}

// previewPublicURL makes pc's URLs name the platform-wide preview address
// raw (scheme://domain[:port], nothing else): its host is the preview
// domain, which an explicit --preview-domain (domainSet) must agree with.
func previewPublicURL(pc *preview.Config, raw string, domainSet bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" || u.User != nil || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("--preview-public-url %q: want scheme://domain[:port], e.g. https://preview.example.com", raw)
	}
	if domainSet && !strings.EqualFold(u.Hostname(), pc.Domain) {
		return fmt.Errorf("--preview-public-url names domain %s, --preview-domain %s: give one, or the same", u.Hostname(), pc.Domain)
	}
	pc.Scheme, pc.Domain, pc.URLPort = u.Scheme, u.Hostname(), 0
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("--preview-public-url %q: bad port", raw)
		}
		pc.URLPort = n
	}
	return nil
}

// bootstrapToken installs the first admin token: PT_TOKEN when set, else
// a generated one saved in the data dir and printed once.
func bootstrapToken(ctx context.Context, tn *tenancy.Service, dataDir string) error {
	path := filepath.Join(dataDir, "admin-token")
	tok := strings.TrimSpace(os.Getenv("PT_TOKEN"))
	generated := false
	if tok == "" {
		if b, err := os.ReadFile(path); err == nil {
			tok = strings.TrimSpace(string(b))
		}
	}
	if tok == "" {
		tok, generated = tenancy.NewToken(), true
	}
	installed, err := tn.Bootstrap(ctx, tok)
	if err != nil {
		return err
	}
	if generated && installed {
		if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "ptd: admin token (saved in %s; shown once):\n%s\n", path, tok)
	}
	return nil
}

func reset(ctx context.Context, args []string) error {
	// A reset removes the bridge, chains and cgroups: never those of a
	// ptd still running.
	cfg, log, claim, err := claimed("ptd reset", args)
	if err != nil {
		return err
	}
	defer claim.Release()
	cfg.host.Egress.ProxyPort = 0 // a reset serves nothing
	h, err := host.Open(ctx, cfg.host, log)
	if err != nil {
		return err
	}
	if err := h.Reset(ctx); err != nil {
		return err
	}
	log.Info("host reset: every sandbox, the bridge, firewall chains and the disk pool mount are gone", "data_dir", cfg.dataDir)
	return nil
}

// openObjects opens the archive object store: S3 when an endpoint is set,
// else a local directory.
func openObjects(cfg config) (objstore.Store, error) {
	if cfg.s3.Endpoint != "" {
		st, err := s3.New(cfg.s3)
		if err != nil {
			return nil, fmt.Errorf("object store: %w", err)
		}
		return st, nil
	}
	st, err := objfs.Open(cfg.objects)
	if err != nil {
		return nil, fmt.Errorf("object store: %w", err)
	}
	return st, nil
}

// daytonaConfig is Daytona's surface's configuration for a ptd of region
// (docs/daytona.md).
func daytonaConfig(region string) daytona.Config {
	c := daytona.DefaultConfig()
	c.Region = region
	return c
}
