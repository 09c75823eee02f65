package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// trust installs a certificate in the sandbox's trust store from inside:
// `pt-agent trust <pem> <bundle> <file>...` appends pem to the bundle
// (unless it holds it already) and writes it to each file, parents made.
// The host runs it in a running gVisor sandbox that a warm create hands
// secrets (docs/sessions.md, "Warm creates"): gVisor caches the root
// filesystem it serves and never sees files the host writes under it (a
// directory made there breaks the guest's own mkdir of it), so the write
// must go through the guest's kernel. runc sandboxes get the same files
// written by the host.
func trust(args []string) error {
	if len(args) < 2 || args[0] == "" {
		return errors.New("usage: pt-agent trust <pem> <bundle> <file>...")
	}
	pem, bundle, files := []byte(args[0]), args[1], args[2:]
	if !bytes.HasSuffix(pem, []byte("\n")) {
		pem = append(pem, '\n')
	}
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return fmt.Errorf("trust: %w", err)
		}
		if err := writeReplace(f, string(pem)); err != nil {
			return fmt.Errorf("trust: %w", err)
		}
	}
	cur, err := os.ReadFile(bundle)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("trust: %w", err)
	}
	if bytes.Contains(cur, pem) {
		return nil
	}
	if len(cur) > 0 && cur[len(cur)-1] != '\n' {
		cur = append(cur, '\n')
	}
	if err := os.MkdirAll(filepath.Dir(bundle), 0o755); err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	if err := writeReplace(bundle, string(append(cur, pem...))); err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	return nil
}
