package platinum

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Version is the SDK's version. It is sent in the default User-Agent so
// ptd's logs show which client made a call.
const Version = "0.1.0"

// DefaultBaseURL is where a ptd started with its defaults listens. It is used
// by NewFromEnv when PT_API_URL is unset.
const DefaultBaseURL = "http://127.0.0.1:7070"

// ErrNoToken is returned by NewFromEnv when PT_TOKEN is unset: every /v1
// call needs a bearer token, so failing early gives a clearer message than
// the 401 every call would get.
var ErrNoToken = errors.New("PT_TOKEN is not set")

// Client talks to one ptd over its REST API. Its services group the calls by
// resource. A Client is safe for concurrent use.
type Client struct {
	// Sandboxes creates, lists, inspects and deletes sandboxes and runs
	// commands and file operations inside them.
	Sandboxes *SandboxesService
	// Templates lists templates and starts template builds.
	Templates *TemplatesService
	// Orgs creates organizations (admin token only).
	Orgs *OrgsService
	// Projects creates and lists projects.
	Projects *ProjectsService
	// Tokens issues API tokens (org admins only).
	Tokens *TokensService
	// Sessions starts, looks up and stops context-owned sessions and runs
	// commands in them.
	Sessions *SessionsService
	// Pools lists and configures warm pools.
	Pools *PoolsService
	// Hosts lists the platform's hosts and drains them (admin token).
	Hosts *HostsService
	// Events reads the org's event feed (list, stream, follow).
	Events *EventsService
	// Webhooks manages webhooks that receive the org's events.
	Webhooks *WebhooksService
	// Artifacts exports files and directories out of sandboxes and
	// fetches them back.
	Artifacts *ArtifactsService

	baseURL      string
	token        string
	httpClient   *http.Client
	userAgent    string
	pollInterval time.Duration
	// retries and noAutoKeys: see WithRetries, WithoutIdempotencyKeys.
	retries    int
	noAutoKeys bool
	retryClock retryClock // the waits between retries (retry.go)
}

// Option configures a Client built by New or NewFromEnv.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests through hc, e.g. to set
// a custom transport or proxy. The default client has no overall timeout,
// because exec streams and downloads can legitimately run for a long time;
// bound calls with their context instead.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.httpClient = hc
		}
	}
}

// WithUserAgent replaces the User-Agent header, so a tool built on the SDK
// (like the pt CLI) identifies itself in ptd's logs.
func WithUserAgent(ua string) Option {
	return func(c *Client) {
		if ua != "" {
			c.userAgent = ua
		}
	}
}

// WithPollInterval sets how often waits (WaitForState, and Create, Stop,
// Start and Archive after a server-side wait ran out) re-read a sandbox. The default is 500ms; the
// server offers no push notification on this API, so this trades latency
// for request load.
func WithPollInterval(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.pollInterval = d
		}
	}
}

// New returns a Client for the ptd at baseURL (e.g. "http://127.0.0.1:7070"),
// authenticating every /v1 call with token.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{
		baseURL:      strings.TrimRight(baseURL, "/"),
		token:        token,
		httpClient:   &http.Client{},
		userAgent:    "platinum-go/" + Version,
		pollInterval: 500 * time.Millisecond,
		retries:      2,
		retryClock:   defaultRetryClock,
	}
	for _, o := range opts {
		o(c)
	}
	c.Sandboxes = &SandboxesService{c: c}
	c.Templates = &TemplatesService{c: c}
	c.Orgs = &OrgsService{c: c}
	c.Projects = &ProjectsService{c: c}
	c.Tokens = &TokensService{c: c}
	c.Sessions = &SessionsService{c: c}
	c.Pools = &PoolsService{c: c}
	c.Hosts = &HostsService{c: c}
	c.Events = &EventsService{c: c}
	c.Webhooks = &WebhooksService{c: c}
	c.Artifacts = &ArtifactsService{c: c}
	return c
}

// NewFromEnv returns a Client configured the way the pt CLI is: PT_API_URL
// (default DefaultBaseURL) and PT_TOKEN. It returns ErrNoToken when PT_TOKEN
// is empty and an error when PT_API_URL is not an http(s) URL.
func NewFromEnv(opts ...Option) (*Client, error) {
	base := os.Getenv("PT_API_URL")
	if base == "" {
		base = DefaultBaseURL
	}
	if err := CheckBaseURL(base); err != nil {
		return nil, err
	}
	token := os.Getenv("PT_TOKEN")
	if token == "" {
		return nil, ErrNoToken
	}
	return New(base, token, opts...), nil
}

// CheckBaseURL reports whether base is usable as a Client's base URL: an
// absolute http or https URL. New does not check, so callers that take the
// URL from users (flags, environment) can report a clear error up front.
func CheckBaseURL(base string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("PT_API_URL %q: want an http:// or https:// URL such as %s", base, DefaultBaseURL)
	}
	return nil
}

// BaseURL returns the ptd URL the Client talks to, for messages.
func (c *Client) BaseURL() string { return c.baseURL }

// newRequest builds a request for path (which starts with "/") and query.
// A nil body sends no body.
func (c *Client) newRequest(ctx context.Context, method, path string, query url.Values, body io.Reader) (*http.Request, error) {
	u := c.baseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("User-Agent", c.userAgent)
	c.setIdempotencyKey(ctx, req)
	return req, nil
}

// send performs req and turns non-2xx answers into *APIError. On success the
// caller owns resp.Body.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.doRetrying(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, decodeAPIError(resp)
	}
	return resp, nil
}

// doJSON sends in (when non-nil) as a JSON body and decodes a 2xx answer into
// out (when non-nil). It returns the HTTP status code of a success.
func (c *Client) doJSON(ctx context.Context, method, path string, query url.Values, in, out any) (int, error) {
	return c.doJSONKeyed(ctx, method, path, query, "", in, out)
}

// doJSONKeyed is doJSON with an explicit Idempotency-Key (none: ""), which
// replaces the one newRequest chose. A keyed call always sends a body (JSON
// null for a nil in), as the key is about that body.
func (c *Client) doJSONKeyed(ctx context.Context, method, path string, query url.Values, key string, in, out any) (int, error) {
	resp, err := c.openJSON(ctx, method, path, query, key, in, "application/json", in != nil || key != "")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode response: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// openJSON sends one request and hands back its 2xx answer for the caller
// to read: the JSON-decoding calls (doJSON) and the streaming ones (exec,
// run-code) share it, so they build, authenticate and check
// requests the same way. With withBody, in is sent as a JSON body; accept,
// when not "", is the Accept header; key, when not "", the Idempotency-Key.
// On success the caller owns resp.Body.
func (c *Client) openJSON(ctx context.Context, method, path string, query url.Values, key string, in any, accept string, withBody bool) (*http.Response, error) {
	var body io.Reader
	if withBody {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := c.newRequest(ctx, method, path, query, body)
	if err != nil {
		return nil, err
	}
	if withBody {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return c.send(req)
}

// sleep waits for d or until ctx is done, returning ctx's error in that case.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Health checks that ptd answers GET /healthz. It needs no token, so it
// tells "ptd is down" apart from "the token is wrong".
func (c *Client) Health(ctx context.Context) error {
	return callJSON(ctx, c, "GET", "/healthz", nil, nil, "health")
}
