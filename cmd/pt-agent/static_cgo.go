//go:build cgo

package main

// pt-agent runs as PID 1 of sandboxes that may have no C library or
// dynamic loader, so it must be a static binary whatever the environment it
// is built in. With cgo off (CGO_ENABLED=0, or no C compiler) Go links it
// static on its own. With cgo on — a plain `go build` or `go install` where
// gcc exists — the net and os/user packages bring in their cgo resolvers,
// and this file has the C linker link the whole binary statically instead
// of against libc.so. The linker then warns that getaddrinfo and getpwnam_r
// "require at runtime the shared libraries": pt-agent itself never calls
// them. It resolves names with Go's own resolver (//go:debug netdns=go in
// main.go) and users from /etc/passwd (internal/agent/passwd.go);
// archive/tar gets owner names through tar.FileInfoNames. One caller is
// left: `pt-agent sftp-server`'s long listing (github.com/pkg/sftp names
// owners with os/user), where the static C library's getpwuid_r may load
// the image's own NSS modules; the build scripts build with cgo off, where
// os/user reads /etc/passwd in Go.
//
// The static link needs the C library's static archive (libc.a: Debian's
// libc6-dev, which gcc's cgo builds already depend on). Where it is
// missing the build fails naming -lc; build with CGO_ENABLED=0 there.

// #cgo LDFLAGS: -static
import "C"
