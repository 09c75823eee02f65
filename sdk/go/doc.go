// Package platinum is the Go SDK for Platinum's REST API (/v1): create,
// list, exec in and copy files to and from sandboxes, build templates and
// create organizations. It is its own module and depends only on the
// standard library, so programs can embed it without pulling in the daemon.
package platinum
