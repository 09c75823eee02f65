package host

import (
	"debug/elf"
	"errors"
	"fmt"
)

// CheckStaticAgent reports why the pt-agent binary at path cannot run in
// a sandbox, or nil when it can. pt-agent runs as PID 1 of sandboxes whose
// root filesystem may have no C library or dynamic loader (busybox has
// none), so it must be a static ELF executable: no program interpreter
// (PT_INTERP) and no shared libraries (DT_NEEDED). cmd/pt-agent links
// itself static even when cgo is on (static_cgo.go), but a binary passed
// with --agent-binary, or built by other means, may not be, and every
// create would then fail later with "failed to load /.pt/pt-agent"; ptd
// refuses to start with such a binary instead.
func CheckStaticAgent(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) {
			return fmt.Errorf("pt-agent %s is not an ELF executable (%v); %s", path, err, agentBuildHint(path))
		}
		return fmt.Errorf("pt-agent %s: %w", path, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("pt-agent %s is an ELF %s, not an executable; %s", path, f.Type, agentBuildHint(path))
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp := "a dynamic loader"
			if b := make([]byte, p.Filesz); p.Filesz > 0 && p.Filesz < 4096 {
				if _, err := p.ReadAt(b, 0); err == nil {
					interp = string(b[:len(b)-1]) // NUL-terminated
				}
			}
			return fmt.Errorf("pt-agent %s is dynamically linked (it needs %s, which sandboxes do not have); %s", path, interp, agentBuildHint(path))
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("pt-agent %s: reading its dynamic section: %w", path, err)
	}
	if len(libs) > 0 {
		return fmt.Errorf("pt-agent %s needs shared libraries %v, which sandboxes do not have; %s", path, libs, agentBuildHint(path))
	}
	return nil
}

func agentBuildHint(path string) string {
	return fmt.Sprintf("build it static: CGO_ENABLED=0 go build -o %s ./cmd/pt-agent (scripts/build.sh does), or pass --agent-binary", path)
}
