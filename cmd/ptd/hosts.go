package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"syscall"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/host"
	"github.com/platinum-dev/platinum/internal/hostreg"
	"github.com/platinum-dev/platinum/internal/store"
)

// runHostRegistry registers this ptd's host in the store with what its
// machine offers, then heartbeats its load and watches every registered
// host's liveness in the background until ctx ends (docs/ARCHITECTURE.md,
// "Many hosts"). A store that refuses the registration stops the start.
func runHostRegistry(ctx context.Context, cfg config, st store.Store, h *host.Host, cp *controlplane.Service, url string, log *slog.Logger) error {
	if cfg.hostHeartbeat <= 0 || cfg.hostLostAfter <= cfg.hostHeartbeat {
		return fmt.Errorf("--host-lost-after (%s) must exceed --host-heartbeat (%s), which must be positive", cfg.hostLostAfter, cfg.hostHeartbeat)
	}
	switch {
	case !cfg.shared():
		// A SQLite store no host joins is one process's: no other ptd
		// can mark this host lost and recover its sandboxes, so there is
		// nothing to fence against.
		cfg.hostFenceAfter = -1
	case cfg.hostFenceAfter == 0:
		cfg.hostFenceAfter = cfg.hostLostAfter / 2
	}
	if cfg.hostFenceAfter >= cfg.hostLostAfter {
		return fmt.Errorf("--host-fence-after (%s) must be shorter than --host-lost-after (%s): a host cut off from the store must stop its sandboxes before the others recover them", cfg.hostFenceAfter, cfg.hostLostAfter)
	}
	res := hostreg.Resources{CPU: runtime.NumCPU()}
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err == nil {
		res.RAMMB = int(uint64(si.Totalram) * uint64(si.Unit) >> 20)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(cfg.dataDir, &fs); err == nil {
		res.DiskGB = int(fs.Blocks * uint64(fs.Bsize) >> 30)
	}
	log = log.With("component", "hosts")
	reg := &hostreg.Registrar{Store: st, Host: store.HostRecord{ID: h.ID(), Region: cfg.region, URL: url},
		Capacity: hostreg.CapacityOf(h.Info(), res), Status: hostreg.StatusFrom(st, h.ID()),
		Interval: cfg.hostHeartbeat, Log: log,
		FenceAfter: cfg.hostFenceAfter, Fence: cp.Fence, Unfence: cp.Unfence}
	rec, err := reg.Register(ctx)
	if err != nil {
		return err
	}
	log.Info("host registered", "host", rec.ID, "generation", rec.Generation, "state", rec.State)
	go reg.Run(ctx)
	watchHosts(ctx, cfg, st, h.ID(), false, cp, log)
	return nil
}

// watchHosts watches every registered host's liveness in the background
// until ctx ends, as one of the ptds that may hold the watch (self names
// this one). An api-only ptd (apiOnly) watches too, deferring to the
// hosts' watchers while any host lives (they recover a lost host's
// sandboxes onto their own), so that the last host's death is still
// marked.
func watchHosts(ctx context.Context, cfg config, st store.Store, self string, apiOnly bool, cp *controlplane.Service, log *slog.Logger) {
	holder := make([]byte, 4)
	rand.Read(holder)
	w := &hostreg.Watcher{Store: st, Holder: fmt.Sprintf("%s/%d/%s", self, os.Getpid(), hex.EncodeToString(holder)),
		Self: self, LostAfter: cfg.hostLostAfter, Interval: cfg.hostHeartbeat, Log: log, DeferToHosts: apiOnly,
		Lost: func(ctx context.Context, lost store.HostRecord) { cp.HostLost(ctx, lost.ID) }}
	go w.Run(ctx)
}
