package platinum_test

import (
	"context"
	"errors"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
	"github.com/platinum-dev/platinum/sdk/go/platinumtest"
)

func TestTemplates(t *testing.T) {
	srv, c := newServer(t)
	ctx := t.Context()
	rows, err := c.Templates.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Slug+":"+string(r.Status))
	}
	if want := []string{"busybox:not_built", "pt-base:not_built"}; !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}

	// The build holds its first step until the client has seen it; ptd
	// saves progress at most every 300ms, so a quick second step may never
	// show.
	seen := make(chan string, 2)
	srv.Host.BuildFunc = func(ctx context.Context, slug, versionID string, progress func(string)) (string, int64, error) {
		progress("step 1")
		select {
		case <-seen:
		case <-ctx.Done():
			return "", 0, ctx.Err()
		}
		progress("step 2")
		return "/templates/" + versionID, 1, nil
	}
	b, err := c.Templates.Build(ctx, "busybox")
	if err != nil || b.Status != platinum.TemplateBuilding {
		t.Fatalf("Build = %+v, %v", b, err)
	}
	var progress []string
	for {
		tpl, err := c.Templates.Get(ctx, "busybox")
		if err != nil {
			t.Fatal(err)
		}
		if tpl.Status != platinum.TemplateBuilding {
			if tpl.Status != platinum.TemplateReady || !strings.HasPrefix(tpl.VersionID, "tplv_") || tpl.CreatedAt.IsZero() {
				t.Errorf("finished build = %+v", tpl)
			}
			break
		}
		if tpl.Progress != "starting" && (len(progress) == 0 || progress[len(progress)-1] != tpl.Progress) {
			progress = append(progress, tpl.Progress)
			seen <- tpl.Progress
		}
		time.Sleep(time.Millisecond)
	}
	if !slices.Equal(progress, []string{"step 1"}) && !slices.Equal(progress, []string{"step 1", "step 2"}) {
		t.Errorf("progress = %q", progress)
	}
	if _, err := c.Templates.Get(ctx, "nope"); !platinum.IsNotFound(err) {
		t.Errorf("Get(nope): err = %v, want not_found", err)
	}
	if _, err := c.Templates.Build(ctx, "nope"); !platinum.IsNotFound(err) {
		t.Errorf("Build(nope): err = %v, want not_found", err)
	}
}

func TestOptionsAndHealth(t *testing.T) {
	var gotUA, gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUA, gotAuth = r.Header.Get("User-Agent"), r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	used := false
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used = true
		return http.DefaultTransport.RoundTrip(r)
	})}
	c := platinum.New(srv.URL+"/", "tok", platinum.WithUserAgent("pt/test"), platinum.WithHTTPClient(hc))
	if err := c.Health(t.Context()); err != nil {
		t.Fatal(err)
	}
	if gotUA != "pt/test" || gotAuth != "Bearer tok" || !used || c.BaseURL() != srv.URL {
		t.Errorf("UA %q auth %q custom client used %v base %q", gotUA, gotAuth, used, c.BaseURL())
	}
	if err := platinum.New(srv.URL, "tok").Health(t.Context()); err != nil || !strings.HasPrefix(gotUA, "platinum-go/") {
		t.Errorf("default UA %q, err %v", gotUA, err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestNewFromEnv(t *testing.T) {
	fake := platinumtest.NewServer(t)
	tests := []struct {
		name     string
		url, tok string
		wantBase string
		wantErr  error
		errText  string
	}{
		{"defaults", "", "t", platinum.DefaultBaseURL, nil, ""},
		{"explicit", fake.URL, platinumtest.Token, fake.URL, nil, ""},
		{"no token", fake.URL, "", "", platinum.ErrNoToken, ""},
		{"not a URL", "127.0.0.1:7070", "t", "", nil, "want an http:// or https:// URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PT_API_URL", tt.url)
			t.Setenv("PT_TOKEN", tt.tok)
			c, err := platinum.NewFromEnv()
			switch {
			case tt.wantErr != nil || tt.errText != "":
				if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) || !strings.Contains(err.Error(), tt.errText) {
					t.Errorf("err = %v, want %v %q", err, tt.wantErr, tt.errText)
				}
			case err != nil:
				t.Fatal(err)
			case c.BaseURL() != tt.wantBase:
				t.Errorf("base = %q, want %q", c.BaseURL(), tt.wantBase)
			}
		})
	}
	t.Setenv("PT_API_URL", fake.URL)
	t.Setenv("PT_TOKEN", platinumtest.Token)
	c, err := platinum.NewFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Templates.List(t.Context()); err != nil {
		t.Errorf("client from env cannot call ptd: %v", err)
	}
}

// TestStdlibOnly keeps the SDK a leaf: it must never import the daemon's
// module (internal/ packages) or any third-party module but the allowed
// ones, so a program that embeds it compiles almost nothing else. Tests
// are not embedded: they and platinumtest (ptd itself, served for tests)
// may import the daemon.
func TestStdlibOnly(t *testing.T) {
	const self = "github.com/platinum-dev/platinum/sdk/go"
	// allowed: .dockerignore's exact matching rules (buildcontext.go),
	// a small module of its own with no dependencies, rather than a
	// second copy of them that would drift from what docker build does.
	allowed := map[string]bool{"github.com/moby/patternmatcher": true, "github.com/moby/patternmatcher/ignorefile": true}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path == "platinumtest" {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(p, "/")
			if strings.Contains(first, ".") && p != self && !strings.HasPrefix(p, self+"/") && !allowed[p] {
				t.Errorf("%s imports %s: the SDK may use only the standard library", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
