#!/usr/bin/env bash
# Quick start, command 2: install what is missing, build, and run every
# test (unit, privileged, end to end) with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
PT_SETUP_TESTS=1 scripts/setup.sh
export PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
scripts/build.sh
go vet ./...
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './tests/compat/e2b/node_modules/*'))
if [ -n "$unformatted" ]; then echo "gofmt needed:" $unformatted >&2; exit 1; fi
# The real e2b npm SDK, pinned by tests/compat/e2b/package-lock.json.
(cd tests/compat/e2b && npm ci --no-audit --no-fund --loglevel=error)
(cd sdk/go && go vet ./... && go test -race -count=1 ./...)
go test -race -count=1 -timeout 30m -p 2 ./...
