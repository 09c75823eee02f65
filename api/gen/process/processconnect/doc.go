// Package processconnect is generated from api/proto/process/process.proto (go generate ./api/proto);
// it holds the Connect-RPC client and handler of pt-agent's process service.
package processconnect
