// Package s3test starts a real S3-compatible server for tests: versitygw
// with its posix backend over a temporary directory, listening on a free
// loopback port. Tests of anything that talks S3 (the s3 store's
// conformance run, archive or lifecycle tests that want S3) use it instead
// of a fake, so signing, multipart and error codes are exercised for real.
//
// versitygw is built from the Go module proxy by scripts/setup.sh. When it
// is missing, Start skips the test, or fails it under CI=true.
package s3test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/objstore/s3"
	"github.com/platinum-dev/platinum/internal/testenv"
	"github.com/platinum-dev/platinum/internal/testproc"
)

// Binary is the server program Start runs.
const Binary = "versitygw"

// Start runs a versitygw on 127.0.0.1 for the rest of t (t.Cleanup kills
// it and removes its data) and returns a Config for it: path-style, plain
// HTTP, fresh random credentials.
func Start(t testing.TB) s3.Config {
	t.Helper()
	testenv.RequiresCommand(t, Binary)
	dir := t.TempDir()
	access, secret := randHex(8), randHex(20)
	var lastErr error
	for range 3 { // a free port can be taken between picking and binding
		addr, err := freePort()
		if err != nil {
			t.Fatalf("s3test: %v", err)
		}
		if err := start(t, dir, addr, access, secret); err != nil {
			lastErr = err
			continue
		}
		cfg := s3.DefaultConfig()
		cfg.Endpoint = "http://" + addr
		cfg.AccessKey, cfg.SecretKey = access, secret
		cfg.PathStyle = true
		return cfg
	}
	t.Fatalf("s3test: versitygw did not start: %v", lastErr)
	return s3.Config{}
}

func start(t testing.TB, dir, addr, access, secret string) error {
	out := &lockedBuffer{}
	cmd := exec.Command(Binary,
		"--access", access, "--secret", secret,
		"--port", addr, "--quiet",
		"posix", dir)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	exited, err := testproc.Start(cmd)
	if err != nil {
		return err
	}
	stop := func() {
		cmd.Process.Kill()
		<-exited
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("exited before listening on %s: %s", addr, out.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Cleanup(stop)
			return nil
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("not listening on %s after 30s: %s", addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// lockedBuffer collects the server's output for error messages.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 64<<10 {
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
