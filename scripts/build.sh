#!/usr/bin/env bash
# Builds ptd, pt and the static pt-agent into ./bin.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
mkdir -p bin
# Without the symbol table and DWARF (-s -w; panics still print stacks): the
# agent starts inside every sandbox, and a smaller file starts faster under
# gVisor (docs/ARCHITECTURE.md, "Cold path").
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o bin/pt-agent ./cmd/pt-agent
go build -trimpath -o bin/ptd ./cmd/ptd
go build -trimpath -o bin/pt ./cmd/pt
