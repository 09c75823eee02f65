// Command pt is Platinum's command-line client: a thin layer over the Go SDK
// (github.com/platinum-dev/platinum/sdk/go) for creating sandboxes, running
// commands in them, copying files and managing templates. It talks to the
// ptd at PT_API_URL (default http://127.0.0.1:7070) with the token in
// PT_TOKEN.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one pt command line and returns the process exit code: 0 on
// success, 1 on errors, 2 on usage errors, and for `pt sandbox exec` the
// command's own exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{
		stdout:       stdout,
		stderr:       stderr,
		stdin:        os.Stdin,
		getenv:       os.Getenv,
		pollInterval: 500 * time.Millisecond,
		termWidth:    func() int { return terminalWidth(os.Stdout, os.Getenv) },
	}
	return a.run(ctx, args)
}

// app is what every verb shares: where output goes, where configuration
// comes from, and how often waits poll. Tests build their own.
type app struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	getenv         func(string) string
	pollInterval   time.Duration
	httpClient     *http.Client // nil: the SDK's default
	// termWidth is stdout's width in columns, 0 when it is not a terminal
	// (nil: not a terminal). Tables drop optional columns to fit it.
	termWidth func() int
}

// width returns stdout's terminal width, 0 when unknown.
func (a *app) width() int {
	if a.termWidth == nil {
		return 0
	}
	return a.termWidth()
}

// run executes one command line; see report for the exit code.
func (a *app) run(ctx context.Context, args []string) int {
	return a.report(ctx, a.dispatch(ctx, args))
}

// dispatch finds args' command in the table (commands.go), parses its
// flags and runs it.
func (a *app) dispatch(ctx context.Context, args []string) error {
	c, rest, err := find(args)
	if err != nil {
		return err
	}
	r, in, err := c.parse(a, rest)
	if err != nil {
		return err
	}
	return r(ctx, in)
}

// report prints err the way every verb does (pt: message, then a hint)
// and returns the exit code for it.
func (a *app) report(ctx context.Context, err error) int {
	if err == nil {
		return 0
	}
	var (
		he *helpError
		ue *usageError
		ee *exitError
	)
	switch {
	case errors.As(err, &he):
		fmt.Fprint(a.stdout, he.usage)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(a.stderr, "pt: %s\n\n%s", ue.msg, ue.usage)
		return 2
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintf(a.stderr, "pt: %s\n", ee.msg)
		}
		return ee.code
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		fmt.Fprintln(a.stderr, "pt: interrupted")
		return 130
	}
	fmt.Fprintf(a.stderr, "pt: %s\n", message(err))
	if h := a.hint(err); h != "" {
		fmt.Fprintf(a.stderr, "hint: %s\n", h)
	}
	if id := requestID(err); id != "" {
		fmt.Fprintf(a.stderr, "request id: %s (ptd's logs name it; quote it when reporting this)\n", id)
	}
	return 1
}

// client builds the SDK client from PT_API_URL and PT_TOKEN.
func (a *app) client() (*platinum.Client, error) {
	base := a.getenv("PT_API_URL")
	if base == "" {
		base = platinum.DefaultBaseURL
	}
	if err := platinum.CheckBaseURL(base); err != nil {
		return nil, withHint(err, "set PT_API_URL to ptd's address, e.g. "+platinum.DefaultBaseURL)
	}
	token := a.getenv("PT_TOKEN")
	if token == "" {
		return nil, platinum.ErrNoToken
	}
	opts := []platinum.Option{
		platinum.WithUserAgent("pt/" + version()),
		platinum.WithPollInterval(a.pollInterval),
	}
	if a.httpClient != nil {
		opts = append(opts, platinum.WithHTTPClient(a.httpClient))
	}
	return platinum.New(base, token, opts...), nil
}

// sleep waits one poll interval or until ctx is done.
func (a *app) sleep(ctx context.Context) error {
	t := time.NewTimer(a.pollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
