#!/usr/bin/env bash
# Quick start, command 2: install what is missing, build, and run every
# test (unit, privileged, end to end) with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
# step prints where the run is and how long it has taken, so a slow CI run
# shows which stage grew.
start=$SECONDS
step() { printf '==> %s (at %dm%02ds)\n' "$1" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }
# leftovers lists what the test harness's ptds make on the host (bridges,
# data dir mounts, cgroup parents, running ptds). A run must leave none of
# it, and a package's own cleanup error can pass unseen (go test shows a
# passing package's output only with -v), so the run checks at its end.
leftovers() {
  { ip -o link show | grep -o ' ptt[0-9a-f]*:' || true
    grep -o ' /var/tmp/pt-data-[^ ]*' /proc/self/mounts || true
    ls -d /sys/fs/cgroup/*/platinum-test-* 2>/dev/null || true
    pgrep -f '/pt-bin-[0-9]*/ptd serve' || true
  } | sort -u
}
before=$(leftovers)
step "setup"
PT_SETUP_TESTS=1 scripts/setup.sh
export PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
step "build and vet"
scripts/build.sh
go vet ./...
# staticcheck's bug checks (SA*) beyond vet: an error dropped by a shadowing
# := is what they caught first. SA1019 (deprecated API) is left out: tar's
# TypeRegA is still what old archives carry. Built from its own module, so
# its dependencies stay out of go.mod.
go run honnef.co/go/tools/cmd/staticcheck@v0.8.1 -checks 'SA*,-SA1019' ./...
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './tests/compat/*/node_modules/*'))
if [ -n "$unformatted" ]; then echo "gofmt needed:" $unformatted >&2; exit 1; fi
step "client packages (npm, pip)"
# The real e2b npm SDK, pinned by tests/compat/e2b/package-lock.json, and
# the real e2b Python SDK, pinned by tests/compat/e2b/requirements.txt.
(cd tests/compat/e2b && npm ci --no-audit --no-fund --loglevel=error &&
  { [ -x .venv/bin/python ] || python3 -m venv .venv; } &&
  .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt)
# The real Daytona SDK under both npm names (@daytonaio/sdk, @daytona/sdk),
# pinned by tests/compat/daytona/package-lock.json.
(cd tests/compat/daytona && npm ci --no-audit --no-fund --loglevel=error)
# The real daytona Python SDK, pinned by tests/compat/daytona/requirements.txt.
(cd tests/compat/daytona && { [ -x .venv/bin/python ] || python3 -m venv .venv; } &&
  .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt)
# The official MCP TypeScript SDK, pinned by tests/compat/mcp/package-lock.json.
(cd tests/compat/mcp && npm ci --no-audit --no-fund --loglevel=error)
# The dashboard's toolchain (Vite, TypeScript), pinned by web/package-lock.json:
# tests/web rebuilds web/dist with it and compares; and playwright-core,
# pinned by tests/web/package-lock.json, which drives Chromium there.
(cd web && npm ci --no-audit --no-fund --loglevel=error)
(cd tests/web && npm ci --no-audit --no-fund --loglevel=error)
# The real @e2b/code-interpreter SDK, pinned by its package-lock.json, and
# the real e2b-code-interpreter Python SDK, pinned by its requirements.txt.
(cd tests/compat/e2b-code-interpreter && npm ci --no-audit --no-fund --loglevel=error &&
  { [ -x .venv/bin/python ] || python3 -m venv .venv; } &&
  .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt)
# The TypeScript SDK: pinned dev dependencies, the generated wire types
# checked against api/openapi.yaml, the build and its unit tests (its
# end-to-end suites run in tests/sdk/ts under go test below).
step "SDKs"
(cd sdk/ts && npm ci --no-audit --no-fund --loglevel=error && npm test)
(cd sdk/go && go vet ./... && go test -race -count=1 ./...)
# The Python SDK: its venv (pinned dev tools, PyPI only), then mypy --strict;
# tests/sdk/python runs its pytest suite against a real ptd in the line below.
[ -x sdk/python/.venv/bin/python ] || python3 -m venv sdk/python/.venv
sdk/python/.venv/bin/pip install -q --disable-pip-version-check -e 'sdk/python[dev]'
(cd sdk/python && .venv/bin/mypy --strict)
# tests/e2e runs its tests one at a time against one ptd and mostly waits on
# its sandboxes (about a quarter of one core), so it runs beside the other
# packages rather than in one of their two slots: once on SQLite, then once
# more against a ptd whose --store is PostgreSQL, a throwaway cluster the
# harness starts (internal/pgtest; docs/ARCHITECTURE.md, "Store").
# The PostgreSQL pass's timeout is twice a normal pass (about 12 min): a test
# that hangs fails with Go's dump of the running tests well inside CI's limit.
e2e=${TMPDIR:-/tmp}/pt-e2e.$$.log
step "tests/e2e (SQLite, then PostgreSQL) beside go test ./..."
{ go test -race -count=1 -timeout 30m ./tests/e2e/ &&
  PT_TEST_STORE=postgres go test -race -count=1 -timeout 25m ./tests/e2e/; } > "$e2e" 2>&1 &
e2e_pid=$!
status=0
go test -race -count=1 -timeout 30m -p 2 $(go list ./... | grep -v '/tests/e2e$') || status=1
# Fuzz every target for PT_FUZZTIME (1000 inputs) each, one target per
# `go test` (Go fuzzes one per invocation), one after another
# (docs/testing.md), while the e2e passes go on.
# A count, not a duration: Go 1.26's coordinator can report its own
# -fuzztime deadline as a failure when a worker is slow to stop.
step "fuzzing"
for pkg in $(grep -rl --include='*_test.go' '^func Fuzz' internal cmd | xargs -n1 dirname | sort -u); do
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$pkg"/*_test.go | cut -c6- | sort -u); do
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "${PT_FUZZTIME:-1000x}" "./$pkg" || status=1
  done
done
step "waiting for tests/e2e"
wait "$e2e_pid" || status=1
cat "$e2e"
rm -f "$e2e"
left=$(comm -13 <(echo "$before") <(leftovers))
if [ -n "$left" ]; then
  echo "the tests left these behind (docs/testing.md, \"Leftovers\"):" $left >&2
  status=1
fi
step "done"
exit "$status"
