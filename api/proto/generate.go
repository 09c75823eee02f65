// Package proto holds pt-agent's Connect-RPC contract (process and
// filesystem services, wire-compatible with E2B's envd). The .proto files
// are the source of truth; `go generate ./api/proto` regenerates the
// checked-in code under api/gen with protoc, protoc-gen-go and
// protoc-gen-connect-go (expected in $HOME/go/bin or on PATH).
package proto

//go:generate env PATH=$HOME/go/bin:$PATH protoc -I . --go_out=../.. --go_opt=module=github.com/platinum-dev/platinum --connect-go_out=../.. --connect-go_opt=module=github.com/platinum-dev/platinum process/process.proto filesystem/filesystem.proto
