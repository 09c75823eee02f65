package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	goruntime "runtime"
	"strings"
	"sync"
	"time"
)

// report, set by -report, writes the run's results as Markdown to
// bench/REPORT.md (run from the repository's root, as every bench is):
// the machine, the date, the commit and the command, then every
// measurement's p50/p95/p99 and its ratio against the same run's
// baseline, then the whole output.
var report = flag.Bool("report", false, "also write the results to bench/REPORT.md: machine, date, commit, every benchmark's p50/p95/p99 and ratio against its same-run baseline")

// reportPath is where -report writes.
const reportPath = "bench/REPORT.md"

// recorder copies what the run prints (stdout and stderr) to the terminal
// and keeps it for the report.
type recorder struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	stdout    *os.File
	stderr    *os.File
	done      sync.WaitGroup
	pipes     []*os.File
	started   time.Time
	loadStart string
	// commit is the checkout's commit when the run started (what was
	// built), read before anything could move it.
	commit string
}

// startRecording redirects os.Stdout and os.Stderr through pipes that
// feed the terminal and the report.
func startRecording() (*recorder, error) {
	r := &recorder{stdout: os.Stdout, stderr: os.Stderr, started: time.Now().UTC(), loadStart: loadavg(), commit: commit()}
	for _, dst := range []**os.File{&os.Stdout, &os.Stderr} {
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		term := *dst
		*dst = pw
		r.pipes = append(r.pipes, pw)
		r.done.Go(func() {
			sc := bufio.NewScanner(pr)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				line := sc.Text() + "\n"
				io.WriteString(term, line)
				r.mu.Lock()
				r.buf.WriteString(line)
				r.mu.Unlock()
			}
		})
	}
	return r, nil
}

// finish restores the terminal and writes the report to path.
func (r *recorder) finish(path string, runErr error) error {
	for _, p := range r.pipes {
		p.Close()
	}
	r.done.Wait()
	if r.stdout != nil {
		os.Stdout, os.Stderr = r.stdout, r.stderr
	}
	var b strings.Builder
	b.WriteString("# Benchmark report\n\n")
	b.WriteString("Written by `go run ./bench -report` (see `bench/README.md` for what each line measures).\n")
	b.WriteString("Every ratio is against a baseline measured in the same run, interleaved where the README says so:\n")
	b.WriteString("compare ratios across machines, not absolute times. With fewer than 20 runs, p95 and p99 are the slowest run.\n\n")
	fmt.Fprintf(&b, "- date: %s (took %s)\n", r.started.Format(time.RFC3339), time.Since(r.started).Round(time.Second))
	if r.commit == "" {
		r.commit = commit()
	}
	fmt.Fprintf(&b, "- commit: %s\n", r.commit)
	fmt.Fprintf(&b, "- command: `go run ./bench %s`\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(&b, "- machine: %s; %d CPUs (%s); %s RAM; kernel %s\n", goruntime.GOARCH, goruntime.NumCPU(), cpuModel(), memTotal(), kernel())
	fmt.Fprintf(&b, "- load average (1, 5, 15 min) at start: %s; at end: %s\n", r.loadStart, loadavg())
	if runErr != nil {
		fmt.Fprintf(&b, "- the run ended early: %v\n", runErr)
	}
	b.WriteString("\n## Results\n\n")
	b.WriteString("| measurement | n | p50 | p95 | p99 | p50 ratio vs its baseline |\n|---|---|---|---|---|---|\n")
	for _, line := range strings.Split(r.buf.String(), "\n") {
		m := reportLine.FindStringSubmatch(line)
		if m == nil {
			// A throughput line (archive.go): p50 only, its time, and a
			// time ratio against its baseline.
			t := throughputLine.FindStringSubmatch(line)
			if t == nil {
				continue
			}
			m = []string{t[0], t[1], t[2], t[3] + " (" + t[4] + ")", "—", "—", t[5]}
		}
		name := strings.TrimSpace(m[1])
		ratio := "—"
		if m[6] != "" {
			ratio = m[6] + "x"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", strings.ReplaceAll(name, "|", `\|`), m[2], m[3], m[4], m[5], ratio)
	}
	b.WriteString("\n## Output\n\n```\n")
	b.WriteString(r.buf.String())
	b.WriteString("```\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// throughputLine matches the archive bench's lines: name, n, p50
// throughput and time, and an optional time ratio.
var throughputLine = regexp.MustCompile(`^(.+?)\s+n=(\d+)\s+p50\s+([0-9.]+ MB/s) \(([^)]+)\)(?:\s+\S+ time ratio ([0-9.]+)x)?\s*$`)

// reportLine matches benchkit.Report's line.
var reportLine = regexp.MustCompile(`^(.+?)\s+n=(\d+)\s+p50\s+(\S+)\s+p95\s+(\S+)\s+p99\s+(\S+)(?:\s+p50 ratio vs baseline ([0-9.]+)x)?\s*$`)

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown (not a git checkout)"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += " (with uncommitted changes)"
	}
	return c
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown model"
}

func memTotal() string {
	b, _ := os.ReadFile("/proc/meminfo")
	var kb int64
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "MemTotal:") {
			fmt.Sscanf(strings.TrimPrefix(l, "MemTotal:"), "%d", &kb)
		}
	}
	return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
}

func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}
