package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
)

// TestReportTable: every line benchkit.Report prints becomes a row of
// REPORT.md's table with its percentiles and, when it has one, its ratio
// against the baseline; other output stays in the raw section only.
func TestReportTable(t *testing.T) {
	r := &recorder{started: time.Now().UTC()}
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	// benchkit.Report prints to os.Stdout: catch it as -report does.
	pr, pw, _ := os.Pipe()
	stdout := os.Stdout
	os.Stdout = pw
	benchkit.Report("raw runc run -d (busybox bundle)", ms(10, 20, 30), nil)
	benchkit.Report("create → first exec (busybox)", ms(40, 50, 60), ms(10, 20, 30))
	os.Stdout = stdout
	pw.Close()
	out := make([]byte, 4096)
	n, _ := pr.Read(out)
	r.buf.Write(out[:n])
	r.buf.WriteString("Snapshots, clones, forks and backups (3 runs each)\n")
	r.buf.WriteString("plain zstd -1 of the same bytes          n=1    p50     297 MB/s (3617.39ms)   archive/zstd time ratio 1.69x\n")
	path := filepath.Join(t.TempDir(), "REPORT.md")
	if err := r.finish(path, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	for _, want := range []string{
		"| raw runc run -d (busybox bundle) | 3 | 20.00ms |",
		"| create → first exec (busybox) | 3 | 50.00ms |",
		"| 2.50x |",
		"| plain zstd -1 of the same bytes | 1 | 297 MB/s (3617.39ms) | — | — | 1.69x |",
		"- commit: ",
		"CPUs",
		"Snapshots, clones, forks and backups (3 runs each)\nplain zstd",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("REPORT.md lacks %q:\n%s", want, got)
		}
	}
}
