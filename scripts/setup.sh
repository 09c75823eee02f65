#!/usr/bin/env bash
# Installs what Platinum needs on a Debian 12 host, only what is missing.
# Idempotent; run as root. Used by ptd-up.sh and test.sh.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1; }
have runc        || need+=(runc)
have mkfs.xfs    || need+=(xfsprogs)
have xfs_growfs  || need+=(xfsprogs)
have ip          || need+=(iproute2)
have iptables    || need+=(iptables)
have debootstrap || need+=(debootstrap)
have losetup     || need+=(mount)
[ -x /bin/busybox ] || need+=(busybox-static)
have zstd        || need+=(zstd)
have curl        || need+=(curl)
have git         || need+=(git)
have lxcfs       || need+=(lxcfs)
if [ "${PT_SETUP_TESTS:-0}" = 1 ]; then
  have node || need+=(nodejs)
  have npm  || need+=(npm)
  # The Python SDK's tests run in a venv (Debian's python3 has no ensurepip
  # without python3-venv).
  have python3 || need+=(python3)
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
  have gcc  || need+=(gcc libc6-dev) # a cgo (dynamic) build in the pt-agent check's test
  # The dashboard's browser tests (tests/web) drive Debian's Chromium headless.
  [ -x /usr/bin/chromium ] || need+=(chromium)
  # The SSH gateway's tests drive the real OpenSSH client tools (ssh,
  # ssh-keygen, scp, sftp).
  { have ssh && have ssh-keygen && have scp && have sftp; } || need+=(openssh-client)
  # The PostgreSQL store's tests start throwaway clusters (internal/pgtest)
  # with Debian's server binaries (/usr/lib/postgresql/<version>/bin).
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
  # pt completion's scripts are syntax-checked by the shells they are for.
  have zsh  || need+=(zsh)
  have fish || need+=(fish)
fi

if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! have go; then
  if [ -x /usr/local/go/bin/go ]; then
    export PATH=/usr/local/go/bin:$PATH
  else
    # Debian's newest Go, then the toolchain go.mod asks for comes from the Go module proxy.
    echo "setup: installing Go" >&2
    echo 'deb http://deb.debian.org/debian bookworm-backports main' >/etc/apt/sources.list.d/backports.list
    apt-get update -qq
    apt-get install -y -qq -t bookworm-backports golang-1.23-go >/dev/null
    ln -sf /usr/lib/go-1.23/bin/go /usr/local/bin/go
  fi
fi

# The gvisor runtime class runs runsc built from gVisor's source (its Go
# branch) through the Go module proxy, pinned here. Debian's packages are
# older: bookworm's is ptrace-only, and bookworm-backports' (2024-07) wakes
# an idle sandbox every 400 µs (systrap's fast-path timer; docs/ARCHITECTURE.md
# "Where gvisor differs"). The source gets third_party/gvisor's patches first,
# in name order (third_party/gvisor/README.md): gVisor's kernel keeps the
# guest within its memory and kills inside at that limit, as Linux's OOM
# killer does, where upstream lets the guest grow until the host ends the
# whole sandbox; and the network stack's packet reader hands its CPU on
# before it waits, so a 1-CPU sandbox answers a packet at once rather than
# 10-20 ms later. The build is stamped with the version and the patches'
# hash (`runsc --version`); an already matching runsc is kept, so re-runs
# cost one `runsc --version`.
RUNSC_MODULE=gvisor.dev/gvisor
RUNSC_VERSION=v0.0.0-20260905035102-160fafc42237
RUNSC_PATCHES=("$(cd "$(dirname "$0")/.." && pwd)"/third_party/gvisor/*.patch)
RUNSC_STAMP="$RUNSC_VERSION+platinum.$(cat "${RUNSC_PATCHES[@]}" | sha256sum | cut -c1-12)"
RUNSC_BIN=/usr/local/bin
if [ "$("$RUNSC_BIN/runsc" --version 2>/dev/null | sed -n '1s/^runsc version //p')" != "$RUNSC_STAMP" ]; then
  echo "setup: building runsc $RUNSC_STAMP from the Go module proxy (a few minutes)" >&2
  # GOTOOLCHAIN=auto: gVisor's go.mod may ask for a newer Go than the local
  # one, which then comes from the Go module proxy too.
  src=$(cd / && GOTOOLCHAIN=auto GOFLAGS=-mod=mod go mod download -json "$RUNSC_MODULE@$RUNSC_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  build=$(mktemp -d)
  cp -r "$src/." "$build"
  chmod -R u+w "$build"
  (cd "$build" && git apply "${RUNSC_PATCHES[@]}" &&
    GOTOOLCHAIN=auto CGO_ENABLED=0 go build -trimpath -o runsc.bin \
      -ldflags "-X gvisor.dev/gvisor/runsc/version.version=$RUNSC_STAMP" ./runsc)
  install -m 0755 "$build/runsc.bin" "$RUNSC_BIN/runsc"
  rm -rf "$build"
fi
# ptd finds runsc on PATH: an older Debian runsc there would shadow this one.
if dpkg-query -W -f='${Status}' runsc 2>/dev/null | grep -q 'ok installed'; then
  echo "setup: removing Debian's runsc package (replaced by $RUNSC_BIN/runsc)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq runsc >/dev/null
fi
hash -r
if [ "$(command -v runsc)" != "$RUNSC_BIN/runsc" ]; then
  echo "setup: warning: runsc on PATH is $(command -v runsc), not $RUNSC_BIN/runsc" >&2
fi

# runc checkpoints need CRIU >= 4.1 (3.17, Debian 12's, fails on kernel
# 6.18's vDSO). Install it only where such a version is packaged; without
# it runc sandboxes stop without memory and ptd reports so.
criu_ok() { have criu && dpkg --compare-versions "$(criu --version 2>/dev/null | sed -n 's/^Version: //p')" ge 4.1; }
if ! criu_ok; then
  # Newest packaged version in any configured suite (backports included).
  cand=$(apt-cache madison criu 2>/dev/null | awk -F'|' '{gsub(/ /, "", $2); print $2}' | sort -V | tail -n1)
  if [ -n "$cand" ] && dpkg --compare-versions "$cand" ge 4.1; then
    echo "setup: installing criu $cand" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "criu=$cand" >/dev/null
  fi
fi

# LXCFS serves per-cgroup /proc/meminfo, /proc/cpuinfo, … that ptd binds into
# runc sandboxes, so they see their own size. No systemd here: start it.
# Never fatal: without it sandboxes see the host's /proc files.
start_lxcfs() {
  local dir=/var/lib/lxcfs
  stat "$dir/proc/meminfo" >/dev/null 2>&1 && return 0
  # A dead lxcfs leaves its FUSE mount behind ("Transport endpoint is not
  # connected"); detach it so a fresh one can mount there.
  if grep -q " $dir " /proc/mounts; then
    umount -l "$dir" 2>/dev/null || fusermount -uz "$dir" 2>/dev/null || true
  fi
  mkdir -p "$dir" 2>/dev/null || true
  [ -e /dev/fuse ] || modprobe fuse 2>/dev/null || true
  setsid lxcfs "$dir" >/var/log/lxcfs.log 2>&1 </dev/null &
  for _ in $(seq 20); do stat "$dir/proc/meminfo" >/dev/null 2>&1 && return 0; sleep 0.3; done
  echo "setup: lxcfs did not start (see /var/log/lxcfs.log); sandboxes will see the host's /proc/meminfo" >&2
}
start_lxcfs

# Loop devices are created on demand; make sure the control device exists.
[ -e /dev/loop-control ] || modprobe loop 2>/dev/null || true

# versitygw: the S3-compatible server the object store tests start on
# loopback (internal/objstore/s3/s3test). Built from the Go module proxy,
# no downloaded binaries; takes about a minute the first time.
VERSITYGW_VERSION=v1.8.0
if [ "${PT_SETUP_TESTS:-0}" = 1 ] && ! have versitygw; then
  echo "setup: building versitygw $VERSITYGW_VERSION" >&2
  (cd / && GOBIN=/usr/local/bin GOTOOLCHAIN=${GOTOOLCHAIN:-auto} \
    go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION")
fi
