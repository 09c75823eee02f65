#!/usr/bin/env bash
# Quick start, command 2: install what is missing, build, and run every
# test (unit, privileged, end to end) with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
PT_SETUP_TESTS=1 scripts/setup.sh
export PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
scripts/build.sh
go vet ./...
(cd sdk/go && go vet ./... && go test -race -count=1 ./...)
go test -race -count=1 -timeout 30m -p 2 ./...
