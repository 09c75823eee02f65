// Package platinum is the Go SDK for Platinum's REST API (/v1): create,
// list, stop, start, archive, rename and resize sandboxes, change their
// environment, group them as parents and children, read their metrics and
// billed usage, exec in them and copy files to and from them (directly or
// through a SandboxHandle from Connect), run background processes in them
// (SandboxHandle.Processes: streamed output, stdin, signals, terminals),
// build templates and create organizations. It is its own
// module and depends only on the standard library, so programs can embed
// it without pulling in the daemon.
package platinum
