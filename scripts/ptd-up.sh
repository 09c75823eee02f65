#!/usr/bin/env bash
# Quick start, command 1: install what is missing, build, and run ptd with
# embedded defaults (SQLite + local disks under /var/lib/platinum, API on
# 127.0.0.1:7070). Extra arguments go to `ptd serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
echo "ptd: starting; in another shell: export PT_API_URL=http://127.0.0.1:7070 PT_TOKEN=\$(cat /var/lib/platinum/admin-token) (or your PT_TOKEN); bin/pt sandbox create -t busybox" >&2
exec bin/ptd serve "$@"
