// Package platinum is the Go SDK for Platinum's REST API (/v1): create,
// list, stop, start and archive sandboxes, exec in them and copy files to
// and from them, build templates and create organizations. It is its own
// module and depends only on the standard library, so programs can embed
// it without pulling in the daemon.
package platinum
