package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// StartService starts cmd as a long-lived service of the sandbox (not one
// of the API's processes: it is neither listed nor signalled with them)
// and returns a channel that receives its exit. It goes through the same
// spawner as processes, so under the PID 1 reaper the status is not lost
// to it. cmd.Wait must not be called.
func (s *Server) StartService(cmd *exec.Cmd) (int, <-chan error, error) {
	pid, ws, err := s.spawn.spawn(func() (int, error) {
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	})
	if err != nil {
		return 0, nil, err
	}
	exited := make(chan error, 1)
	go func() {
		st := <-ws
		s.noteExit(st)
		exited <- fmt.Errorf("%s", statusString(st))
	}()
	return pid, exited, nil
}

// writeEnvFile replaces Config.EnvFile with env (caller holds s.mu, so
// writes land in the order the environment changed).
func (s *Server) writeEnvFile(env map[string]string) error {
	if s.cfg.EnvFile == "" {
		return nil
	}
	b, err := json.Marshal(env)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.cfg.EnvFile), 0o700); err != nil {
		return err
	}
	tmp := s.cfg.EnvFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.cfg.EnvFile)
}
