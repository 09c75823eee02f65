// Package filesystem is generated from api/proto/filesystem/filesystem.proto (go generate ./api/proto);
// it holds the messages of pt-agent's envd-compatible filesystem service.
package filesystem
