package controlplane

import (
	"context"
	"net"
	"strconv"

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
	end := s.busy.Start(sb.ID)
	return upstream.Host(sb, net.JoinHostPort(sb.Address, strconv.Itoa(CodeInterpreterPort))), sb.Template == CodeInterpreterTemplate,
		func() { end(); s.Touch(sb.ID) }, nil
}

// CodeInterpreterTemplate is the template whose sandboxes run the server.
const CodeInterpreterTemplate = "code-interpreter"
