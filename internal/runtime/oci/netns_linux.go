//go:build linux

package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"

	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// With --network=sandbox, runsc copies the addresses and routes of the
// namespace's interfaces into gVisor's network stack and deletes them from
// the kernel's interfaces (the kernel would otherwise answer for the same
// address). Nothing puts them back when the sandbox ends, so the next
// sandbox in that namespace (a restart, a restore) would get no network.
// Before starting runsc we therefore record the namespace's configuration in
// the bundle, and after Delete we put it back.

// netnsRecordFile is the record's name in the bundle.
const netnsRecordFile = "netns.json"

// netnsRecord is a namespace's interface configuration, as the host layer
// made it.
type netnsRecord struct {
	Path  string       `json:"path"`
	Links []linkRecord `json:"links"`
}

type linkRecord struct {
	Name   string        `json:"name"`
	Addrs  []string      `json:"addrs"` // CIDR, e.g. 10.11.0.2/16
	Routes []routeRecord `json:"routes"`
}

type routeRecord struct {
	Dst      string `json:"dst,omitempty"` // CIDR; empty for a default route
	Gw       string `json:"gw,omitempty"`
	Src      string `json:"src,omitempty"`
	Scope    uint8  `json:"scope"`
	Priority int    `json:"priority,omitempty"`
}

func (r netnsRecord) hasAddrs() bool {
	for _, l := range r.Links {
		if len(l.Addrs) > 0 {
			return true
		}
	}
	return false
}

// prepareNetns records spec's namespace configuration if it has addresses,
// or puts back the recorded one if a previous sandbox took them.
func prepareNetns(spec runtime.Spec) error {
	cur, err := captureNetns(spec.NetNSPath)
	if err != nil {
		return err
	}
	path := filepath.Join(spec.BundleDir, netnsRecordFile)
	if cur.hasAddrs() {
		b, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		return os.Rename(tmp, path)
	}
	old, err := readNetnsRecord(spec.BundleDir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && old.Path != spec.NetNSPath {
		return nil // nothing known: gVisor runs with loopback only
	}
	if err != nil {
		return err
	}
	return applyNetns(old)
}

// restoreNetns puts back the configuration recorded in bundle, if any, into
// its namespace, if that still exists.
func restoreNetns(bundle string) error {
	rec, err := readNetnsRecord(bundle)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(rec.Path); errors.Is(err, fs.ErrNotExist) {
		return nil // the host layer removed the namespace already
	}
	return applyNetns(rec)
}

func readNetnsRecord(bundle string) (netnsRecord, error) {
	var rec netnsRecord
	b, err := os.ReadFile(filepath.Join(bundle, netnsRecordFile))
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("%s: %w", netnsRecordFile, err)
	}
	return rec, nil
}

func netlinkAt(path string) (*netlink.Handle, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", path, err)
	}
	return h, nil
}

// captureNetns reads the addresses and main-table routes of every
// non-loopback interface in the namespace at path. Link-local IPv6
// addresses and routes the kernel derives from addresses are left out: the
// kernel recreates them.
func captureNetns(path string) (netnsRecord, error) {
	rec := netnsRecord{Path: path}
	h, err := netlinkAt(path)
	if err != nil {
		return rec, err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return rec, fmt.Errorf("links in %s: %w", path, err)
	}
	for _, l := range links {
		attrs := l.Attrs()
		if attrs.Flags&net.FlagLoopback != 0 {
			continue
		}
		lr := linkRecord{Name: attrs.Name}
		addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return rec, fmt.Errorf("addresses of %s in %s: %w", attrs.Name, path, err)
		}
		for _, a := range addrs {
			if a.IP.IsLinkLocalUnicast() {
				continue
			}
			lr.Addrs = append(lr.Addrs, a.IPNet.String())
		}
		routes, err := h.RouteList(l, netlink.FAMILY_ALL)
		if err != nil {
			return rec, fmt.Errorf("routes of %s in %s: %w", attrs.Name, path, err)
		}
		for _, r := range routes {
			if r.Protocol == unix.RTPROT_KERNEL || r.Table != unix.RT_TABLE_MAIN ||
				r.Dst != nil && (r.Dst.IP.IsLinkLocalUnicast() || r.Dst.IP.IsMulticast()) {
				continue
			}
			rr := routeRecord{Scope: uint8(r.Scope), Priority: r.Priority}
			if r.Dst != nil && !isDefault(r.Dst) {
				rr.Dst = r.Dst.String()
			}
			if r.Gw != nil {
				rr.Gw = r.Gw.String()
			}
			if r.Src != nil {
				rr.Src = r.Src.String()
			}
			lr.Routes = append(lr.Routes, rr)
		}
		if len(lr.Addrs) > 0 || len(lr.Routes) > 0 {
			rec.Links = append(rec.Links, lr)
		}
	}
	return rec, nil
}

func isDefault(n *net.IPNet) bool {
	ones, _ := n.Mask.Size()
	return ones == 0 && n.IP.IsUnspecified()
}

// applyNetns adds the recorded addresses, then routes, that are missing.
func applyNetns(rec netnsRecord) error {
	h, err := netlinkAt(rec.Path)
	if err != nil {
		return err
	}
	defer h.Close()
	for _, lr := range rec.Links {
		l, err := h.LinkByName(lr.Name)
		if err != nil {
			return fmt.Errorf("%s in %s: %w", lr.Name, rec.Path, err)
		}
		for _, a := range lr.Addrs {
			addr, err := netlink.ParseAddr(a)
			if err != nil {
				return fmt.Errorf("%s: address %q: %w", lr.Name, a, err)
			}
			if err := h.AddrAdd(l, addr); err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("%s in %s: add %s: %w", lr.Name, rec.Path, a, err)
			}
		}
		for _, rr := range lr.Routes {
			route := netlink.Route{LinkIndex: l.Attrs().Index, Scope: netlink.Scope(rr.Scope), Priority: rr.Priority,
				Gw: net.ParseIP(rr.Gw), Src: net.ParseIP(rr.Src)}
			if rr.Dst != "" {
				_, dst, err := net.ParseCIDR(rr.Dst)
				if err != nil {
					return fmt.Errorf("%s: route %q: %w", lr.Name, rr.Dst, err)
				}
				route.Dst = dst
			}
			if err := h.RouteAdd(&route); err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("%s in %s: route %+v: %w", lr.Name, rec.Path, rr, err)
			}
		}
	}
	return nil
}

// startHidingNetSysctls starts cmd from a thread whose mount namespace has
// an empty read-only tmpfs over /proc/sys/net.
//
// runsc up to at least 2024-07 decides it was handed the host's network
// namespace when /proc/sys/net/core/rmem_default exists after joining the
// sandbox's, and then refuses --network=sandbox ("cannot run with network
// enabled in root network namespace"). Recent kernels (6.18 here) have that
// file in every namespace, so the check always fails. The runsc command
// reads nothing else under /proc/sys/net, so hiding it from that process is
// enough; newer runsc releases, which test differently, are unaffected.
//
// The namespace is a slave of the host's, so unmounts on the host still
// reach it (and the gofer and sandbox that inherit it) and it never pins
// another sandbox's disk. The thread stays locked to its goroutine, which
// Go then retires with the goroutine instead of reusing it.
//
// Never the process's main thread: Go cannot retire that one, and
// /proc/self (mountinfo above all) shows the main thread's namespace to
// every thread. A ptd whose main thread had entered this namespace saw
// none of the sandbox disks it mounted afterwards ("nothing mounted at …"
// on every resize, delete and snapshot). unshareOffMain keeps it out.
func startHidingNetSysctls(cmd *exec.Cmd) error {
	return unshareOffMain(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("unshare mount namespace: %w", err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			return fmt.Errorf("make / a slave mount: %w", err)
		}
		if err := unix.Mount("tmpfs", "/proc/sys/net", "tmpfs",
			unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=555"); err != nil {
			return fmt.Errorf("hide /proc/sys/net: %w", err)
		}
		return cmd.Start()
	})
}

// unshareOffMain runs fn on a thread of its own, locked to it and retired
// with it, that is never the process's main thread; fn may change that
// thread's namespaces.
func unshareOffMain(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		goruntime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// This is the main thread: keep it locked (so the goroutine
			// below gets another), then give it back unchanged.
			defer goruntime.UnlockOSThread()
			errc <- unshareOffMain(fn)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
