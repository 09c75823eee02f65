package mcpserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progress sends notifications/progress for one tool call, when the
// caller asked for them with a progress token (otherwise it does nothing).
// The API reports no totals for these waits, so progress counts the
// notifications and the message says what is happening.
type progress struct {
	session *mcp.ServerSession
	token   any
	mu      sync.Mutex
	n       float64
	last    string
}

func newProgress(req *mcp.CallToolRequest) *progress {
	p := &progress{}
	if req != nil && req.Params != nil {
		p.session, p.token = req.Session, req.Params.GetProgressToken()
	}
	return p
}

// send reports msg unless it repeats the last message.
func (p *progress) send(ctx context.Context, msg string) {
	if p.token == nil || p.session == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if msg == p.last {
		return
	}
	p.last = msg
	p.n++
	// A lost notification only loses a message; the call goes on.
	_ = p.session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: p.n, Message: msg})
}

// heartbeat is how often during reports a single long /v1 call.
const heartbeat = time.Second

// during runs fn, one /v1 call that answers only when it is done
// (snapshot, fork), and reports "what: running (Ns)" every heartbeat
// meanwhile, so a client sees the call is alive.
func (p *progress) during(ctx context.Context, what string, fn func(context.Context) error) error {
	p.send(ctx, what+": started")
	if p.token == nil {
		return fn(ctx)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				p.send(ctx, fmt.Sprintf("%s: running (%ds)", what, int(time.Since(start).Seconds())))
			}
		}
	}()
	err := fn(ctx)
	close(done)
	wg.Wait()
	if err == nil {
		p.send(ctx, what+": done")
	}
	return err
}
