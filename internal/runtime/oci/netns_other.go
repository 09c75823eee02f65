//go:build !linux

package oci

import (
	"errors"
	"os/exec"

	"github.com/platinum-dev/platinum/internal/runtime"
)

var errNotLinux = errors.New("network namespaces need Linux")

func prepareNetns(spec runtime.Spec) error      { return errNotLinux }
func restoreNetns(bundle string) error          { return nil }
func startHidingNetSysctls(cmd *exec.Cmd) error { return errNotLinux }
