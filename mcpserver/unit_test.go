package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

func TestHeadTail(t *testing.T) {
	tail := MaxOutputBytes - HeadBytes
	for _, c := range []struct {
		name   string
		writes []int // sizes, filled with a running byte pattern
		cut    int64
	}{
		{"empty", nil, 0},
		{"small", []int{10}, 0},
		{"exactly the limit", []int{MaxOutputBytes}, 0},
		{"one byte over", []int{MaxOutputBytes + 1}, 1},
		{"many small writes", repeat(1000, 100), 100*1000 - int64(MaxOutputBytes)},
		{"one huge write", []int{1 << 20}, 1<<20 - int64(MaxOutputBytes)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h headTail
			var all []byte
			for _, n := range c.writes {
				p := make([]byte, n)
				for i := range p {
					p[i] = 'a' + byte((len(all)+i)%26)
				}
				all = append(all, p...)
				if got, err := h.Write(p); got != n || err != nil {
					t.Fatalf("Write(%d) = %d, %v", n, got, err)
				}
			}
			if h.cut() != c.cut {
				t.Fatalf("cut %d, want %d", h.cut(), c.cut)
			}
			want := string(all)
			if c.cut > 0 {
				want = string(all[:HeadBytes]) + fmt.Sprintf("\n…[%d bytes cut]…\n", c.cut) + string(all[len(all)-tail:])
			}
			if got := h.String(); got != want {
				t.Errorf("String() has %d bytes, want %d (head %q…)", len(got), len(want), got[:min(20, len(got))])
			}
		})
	}
}

func repeat(n, times int) []int {
	s := make([]int, times)
	for i := range s {
		s[i] = n
	}
	return s
}

func TestFileURI(t *testing.T) {
	for _, c := range []struct{ id, path, uri string }{
		{"sbx_1", "/etc/os-release", "platinum://sandboxes/sbx_1/files/etc/os-release"},
		{"sbx_1", "/root/a b/c%d.txt", "platinum://sandboxes/sbx_1/files/root/a%20b/c%25d.txt"},
	} {
		if got := fileURI(c.id, c.path); got != c.uri {
			t.Errorf("fileURI(%q, %q) = %q, want %q", c.id, c.path, got, c.uri)
		}
		id, path, err := parseFileURI(c.uri)
		if err != nil || id != c.id || path != c.path {
			t.Errorf("parseFileURI(%q) = %q, %q, %v", c.uri, id, path, err)
		}
	}
	for _, bad := range []string{
		"platinum://sandboxes/sbx_1/files/", "platinum://sandboxes/sbx_1", "file:///etc/passwd",
		"platinum://templates", "platinum://sandboxes//files/x",
	} {
		if _, _, err := parseFileURI(bad); err == nil {
			t.Errorf("parseFileURI(%q) accepted it", bad)
		}
	}
}

func TestToolError(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&platinum.APIError{StatusCode: 404, Code: "not_found", Message: "no sandbox sbx_1"}, `[not_found] no sandbox sbx_1`},
		{&platinum.APIError{StatusCode: 400, Code: "invalid_request", Message: "too long", Body: map[string]any{"field": "timeout_ms"}},
			`[invalid_request] too long (argument "timeout_seconds")`},
		{&platinum.APIError{StatusCode: 400, Code: "invalid_request", Message: "bad", Body: map[string]any{"field": "env"}}, `[invalid_request] bad (argument "env")`},
		{fmt.Errorf("wrapped: %w", &platinum.APIError{StatusCode: 409, Code: "conflict", Message: "creating"}), `[conflict] creating`},
		{&platinum.StateError{ID: "sbx_1", Want: "running", Got: "failed", Reason: "boom"}, `[sandbox_failed] sandbox sbx_1 is failed, not running: boom`},
		{context.Canceled, `[cancelled] context canceled`},
		{errors.New("dial tcp: refused"), `[internal] dial tcp: refused`},
	} {
		if got := toolError(c.err).Error(); got != c.want {
			t.Errorf("toolError(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestFileContent(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	if c := fileContent("u", []byte("héllo")); !strings.Contains(fmt.Sprintf("%T", c), "TextContent") {
		t.Errorf("UTF-8 text gives %T", c)
	}
	if c := fileContent("u", png); !strings.Contains(fmt.Sprintf("%T", c), "ImageContent") {
		t.Errorf("a PNG gives %T", c)
	}
	if c := fileContent("u", []byte{0xff, 0x00, 0x01}); !strings.Contains(fmt.Sprintf("%T", c), "EmbeddedResource") {
		t.Errorf("binary gives %T", c)
	}
}
