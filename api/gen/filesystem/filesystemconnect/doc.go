// Package filesystemconnect is generated from api/proto/filesystem/filesystem.proto (go generate ./api/proto);
// it holds the Connect-RPC client and handler of pt-agent's filesystem service.
package filesystemconnect
