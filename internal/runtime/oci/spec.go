package oci

// The types below are the subset of the OCI runtime-spec (v1.0.2,
// config.md and config-linux.md) that Platinum writes. They are
// hand-written rather than imported from
// github.com/opencontainers/runtime-spec so the driver adds no module and
// the golden config.json shows every field we set; JSON names match the
// spec exactly.

const ociVersion = "1.0.2"

type ociSpec struct {
	Version  string     `json:"ociVersion"`
	Process  *ociProc   `json:"process"`
	Root     *ociRoot   `json:"root"`
	Hostname string     `json:"hostname,omitempty"`
	Mounts   []ociMount `json:"mounts"`
	Linux    *ociLinux  `json:"linux"`
}

type ociProc struct {
	Terminal        bool      `json:"terminal"`
	User            ociUser   `json:"user"`
	Args            []string  `json:"args"`
	Env             []string  `json:"env,omitempty"`
	Cwd             string    `json:"cwd"`
	Capabilities    *ociCaps  `json:"capabilities,omitempty"`
	Rlimits         []ociRlim `json:"rlimits,omitempty"`
	NoNewPrivileges bool      `json:"noNewPrivileges"`
	OOMScoreAdj     *int      `json:"oomScoreAdj,omitempty"`
}

type ociUser struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

type ociCaps struct {
	Bounding    []string `json:"bounding"`
	Effective   []string `json:"effective"`
	Inheritable []string `json:"inheritable"`
	Permitted   []string `json:"permitted"`
	Ambient     []string `json:"ambient"`
}

type ociRlim struct {
	Type string `json:"type"`
	Hard uint64 `json:"hard"`
	Soft uint64 `json:"soft"`
}

type ociRoot struct {
	Path     string `json:"path"`
	Readonly bool   `json:"readonly"`
}

type ociMount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type,omitempty"`
	Source      string   `json:"source,omitempty"`
	Options     []string `json:"options,omitempty"`
}

type ociLinux struct {
	Sysctl        map[string]string `json:"sysctl,omitempty"`
	Resources     *ociResources     `json:"resources"`
	CgroupsPath   string            `json:"cgroupsPath"`
	Namespaces    []ociNamespace    `json:"namespaces"`
	Devices       []ociDevice       `json:"devices"`
	Seccomp       *ociSeccomp       `json:"seccomp,omitempty"`
	MaskedPaths   []string          `json:"maskedPaths"`
	ReadonlyPaths []string          `json:"readonlyPaths"`
}

type ociNamespace struct {
	Type string `json:"type"`
	Path string `json:"path,omitempty"`
}

type ociDevice struct {
	Type     string  `json:"type"`
	Path     string  `json:"path"`
	Major    int64   `json:"major"`
	Minor    int64   `json:"minor"`
	FileMode *uint32 `json:"fileMode,omitempty"`
	UID      *uint32 `json:"uid,omitempty"`
	GID      *uint32 `json:"gid,omitempty"`
}

type ociResources struct {
	Devices []ociDeviceRule `json:"devices"`
	Memory  *ociMemory      `json:"memory,omitempty"`
	CPU     *ociCPU         `json:"cpu,omitempty"`
	Pids    *ociPids        `json:"pids,omitempty"`
}

type ociDeviceRule struct {
	Allow  bool   `json:"allow"`
	Type   string `json:"type,omitempty"`
	Major  *int64 `json:"major,omitempty"`
	Minor  *int64 `json:"minor,omitempty"`
	Access string `json:"access"`
}

type ociMemory struct {
	Limit *int64 `json:"limit,omitempty"`
	Swap  *int64 `json:"swap,omitempty"`
}

type ociCPU struct {
	Quota  *int64  `json:"quota,omitempty"`
	Period *uint64 `json:"period,omitempty"`
	Cpus   string  `json:"cpus,omitempty"`
}

type ociPids struct {
	Limit int64 `json:"limit"`
}

type ociSeccomp struct {
	DefaultAction string           `json:"defaultAction"`
	Architectures []string         `json:"architectures"`
	Syscalls      []ociSyscallRule `json:"syscalls"`
}

type ociSyscallRule struct {
	Names    []string        `json:"names"`
	Action   string          `json:"action"`
	ErrnoRet *uint           `json:"errnoRet,omitempty"`
	Args     []ociSeccompArg `json:"args,omitempty"`
	// Comment documents the rule in config.json; runtimes ignore unknown
	// fields.
	Comment string `json:"comment,omitempty"`
}

type ociSeccompArg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo,omitempty"`
	Op       string `json:"op"`
}

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
