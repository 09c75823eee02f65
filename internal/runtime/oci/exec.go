package oci

import (
	"context"
	"fmt"
)

// ExecPrivileged runs args inside running container id with the extra
// capabilities caps (e.g. CAP_SYS_ADMIN, which sandboxes never have),
// waits for it and returns its standard output. The host uses it for
// one-shot fixes the sandbox itself may not do, such as giving a clone its
// own hostname. The command must be short-lived and read no stdin.
func (r *Runtime) ExecPrivileged(ctx context.Context, id string, caps []string, args ...string) ([]byte, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("exec %s: no command", id)
	}
	sub := []string{"exec"}
	for _, c := range caps {
		sub = append(sub, "--cap", c)
	}
	sub = append(sub, id)
	out, err := r.run(ctx, append(sub, args...)...)
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", id, err)
	}
	return out, nil
}
