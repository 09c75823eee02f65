// Package process is generated from api/proto/process/process.proto (go generate ./api/proto);
// it holds the messages of pt-agent's envd-compatible process service.
package process
