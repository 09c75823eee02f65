package oci

// The OCI config (config.json) is written with the runtime-spec's own Go
// types (github.com/opencontainers/runtime-spec/specs-go); ociVersion is
// the spec version it declares, which every runc and runsc we support
// reads. The types below are the runtimes' command output, which the spec
// does not cover.

const ociVersion = "1.0.2"

// runc's `state` / `list --format json` output.
type ociState struct {
	ID     string `json:"id"`
	Pid    int    `json:"pid"`
	Status string `json:"status"`
	Bundle string `json:"bundle"`
}

// runc's `events --stats` output (libcontainer's types.Event/Stats).
type ociEvent struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	Data struct {
		CPU struct {
			Usage struct {
				Total uint64 `json:"total"`
			} `json:"usage"`
		} `json:"cpu"`
		Memory struct {
			Usage struct {
				Usage uint64 `json:"usage"`
				Limit uint64 `json:"limit"`
			} `json:"usage"`
			Stats map[string]uint64 `json:"stats"`
		} `json:"memory"`
		Pids struct {
			Current uint64 `json:"current"`
			Limit   uint64 `json:"limit"`
		} `json:"pids"`
	} `json:"data"`
}
