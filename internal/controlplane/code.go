package controlplane

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/upstream"
)

// CodeInterpreterPort is where the code-interpreter server listens inside
// sandboxes of the code-interpreter template (docs/code-interpreter.md).
const CodeInterpreterPort = 49999

// MaxCodeBytes caps one cell's source (UTF-8 bytes).
const MaxCodeBytes = 1 << 20

// CodeServer returns the address of a running sandbox's code-interpreter
// server for p, named for the sandbox's boot (upstream.Host: a client
// that keeps connections pools them per boot; upstream.Addr gives the
// address to dial), and a func to call when the call ends. The call counts as
// activity and keeps the sandbox busy (its idle timers wait) while it
// lasts; another org's sandbox is not found. expected says whether the
// sandbox's template runs the server (a caller may wait for it to come up
// after a boot rather than give up at once).
func (s *Service) CodeServer(ctx context.Context, p Principal, id string) (addr string, expected bool, done func(), err error) {
	sb, _, err := s.RunningAgent(ctx, p, id)
	if err != nil {
		return "", false, nil, err
	}
	end := s.busy.start(sb.ID)
	return upstream.Host(sb, net.JoinHostPort(sb.Address, strconv.Itoa(CodeInterpreterPort))), sb.Template == CodeInterpreterTemplate,
		func() { end(); s.Touch(sb.ID) }, nil
}

// CodeInterpreterTemplate is the template whose sandboxes run the server.
const CodeInterpreterTemplate = "code-interpreter"

// kernelClient asks a sandbox's code-interpreter server once, keeping no
// connection to an address another sandbox may take later.
var kernelClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// WaitCodeKernel waits until a code-interpreter sandbox's server has its
// default Python kernel up (GET /health?kernel=python; the server starts
// it at boot), for the warm pools: a pooled sandbox becomes claimable only
// then, so a warm create's first cell does not wait for IPython's start
// (docs/code-interpreter.md, "The first result"). It asks nothing of a
// sandbox of another template. The server comes up after pt-agent, so a
// refused connection is asked again until ctx ends; a server that answers
// with an error (its kernel did not start) is an error at once.
func (s *Service) WaitCodeKernel(ctx context.Context, sb sandbox.Sandbox) error {
	if sb.Template != CodeInterpreterTemplate {
		return nil
	}
	u := "http://" + net.JoinHostPort(sb.Address, strconv.Itoa(CodeInterpreterPort)) + "/health?kernel=python"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := kernelClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("code interpreter of %s: kernel start answered %s", sb.ID, resp.Status)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("code interpreter of %s: %w (last: %v)", sb.ID, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
