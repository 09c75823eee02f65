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
if [ "${PT_SETUP_TESTS:-0}" = 1 ]; then
  have node || need+=(nodejs)
  have npm  || need+=(npm)
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

# Loop devices are created on demand; make sure the control device exists.
[ -e /dev/loop-control ] || modprobe loop 2>/dev/null || true
