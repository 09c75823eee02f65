package controlplane

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// lockedBuffer is a log sink safe for the service's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestTemplateBuildProgressInLogAndAPI: the first create on an unbuilt
// template builds it, and the build's progress lines reach ptd's log and
// the template's record (what GET /v1/templates/{slug} and the CLI show)
// while it runs; the version ends ready with a tplv_ ID.
func TestTemplateBuildProgressInLogAndAPI(t *testing.T) {
	release := make(chan struct{})
	h := &fakeHost{BuildFunc: func(ctx context.Context, slug, v string, progress func(string)) (string, int64, error) {
		progress("debootstrap: retrieving packages")
		<-release
		progress("packing rootfs")
		return "/t/" + v, 1, nil
	}}
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	cfg := DefaultConfig()
	cfg.PollInterval = 20 * time.Millisecond
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	s := New(cfg, st, h, tenancy.New(tenancy.DefaultConfig(), st, logger), logger)
	t.Cleanup(func() { s.Close(); st.Close() })
	s.noAgentInit = true
	ctx := context.Background()

	sb, err := s.Create(ctx, org, CreateRequest{Template: "pt-base"})
	if err != nil {
		t.Fatal(err)
	}
	// While the build runs, its progress is on the template's record.
	for i := 0; ; i++ {
		tpl, err := s.GetTemplate(ctx, "pt-base")
		if err != nil {
			t.Fatal(err)
		}
		if v := tpl.Version; v != nil && v.Status == store.TemplateBuilding && v.Progress == "debootstrap: retrieving packages" {
			break
		}
		if i == 500 {
			t.Fatalf("build progress never shown on the template: %+v", tpl.Version)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	if _, ok, err := s.WaitFor(ctx, org, sb.ID, sandbox.StateRunning, 10*time.Second); err != nil || !ok {
		t.Fatalf("sandbox not running after the build: %v", err)
	}
	tpl, err := s.GetTemplate(ctx, "pt-base")
	if err != nil || tpl.Version == nil || tpl.Version.Status != store.TemplateReady || !strings.HasPrefix(tpl.Version.ID, "tplv_") {
		t.Fatalf("template after the build: %+v %v", tpl.Version, err)
	}
	log := logs.String()
	for _, line := range []string{"debootstrap: retrieving packages", "packing rootfs"} {
		if !strings.Contains(log, `msg="template build" template=pt-base version=`+tpl.Version.ID+` progress="`+line+`"`) {
			t.Errorf("log lacks progress %q:\n%s", line, log)
		}
	}
}
