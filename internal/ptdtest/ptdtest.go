// Package ptdtest builds Platinum's binaries and runs a real ptd on a
// free loopback port with its own data dir, bridge, subnet and cgroup
// parent, so end-to-end tests and benchmarks collide with nothing and
// leave nothing behind. With PT_TEST_STORE=postgres (or Options.Store)
// each ptd keeps its metadata in a throwaway PostgreSQL cluster of its
// own (internal/pgtest) instead of SQLite in its data dir.
package ptdtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/pgtest"
	"github.com/platinum-dev/platinum/internal/testproc"
)

// Daemon is a running ptd.
type Daemon struct {
	URL, Token, DataDir, BinDir string
	// PreviewURL is the preview proxy's listener (http://127.0.0.1:port).
	PreviewURL string
	// SSHAddr is the SSH gateway's listener (127.0.0.1:port): each ptd of
	// a test run has its own, so several never race for the default.
	SSHAddr string
	// MetricsURL is the --metrics-listen listener (http://127.0.0.1:port),
	// serving /metrics without a token.
	MetricsURL             string
	Bridge, Subnet, Cgroup string
	cmd                    *exec.Cmd
	logf                   *os.File
	// sharedBin: other daemons may use BinDir too (each logs to a file of
	// its own); builtBin: BinDir is a build Start made, removed by the
	// Stop of the last daemon using it.
	sharedBin, builtBin, ownData bool
	exited                       <-chan struct{}
	keep                         bool
	args                         []string
	// Env is added to ptd's environment at each (re)start, e.g.
	// crashpoint's PT_CRASH_AT; set it to nil before Restart to drop it.
	Env []string
	// PG is the PostgreSQL cluster holding the store (nil on SQLite) and
	// StoreURL ptd's --store URL on it.
	PG       *pgtest.Cluster
	StoreURL string
}

// Options tune the daemon.
type Options struct {
	// RepoRoot is the module root to build from; empty finds it above the
	// working directory (RepoRoot).
	RepoRoot string
	// ExtraArgs go to `ptd serve`, after the harness's own flags (a flag
	// given again wins). The harness pins --default-runtime runc: the
	// suites include tests of runc-only behaviour (LXCFS /proc sizes, nproc
	// after a live resize, the warm freeze), and tests of gvisor name their
	// runtime in the create request.
	ExtraArgs []string
	// Keep leaves the data and binary dirs behind for inspection.
	Keep bool
	// Env is added to ptd's environment (see Daemon.Env).
	Env []string
	// Token, when set, is the admin token (PT_TOKEN) instead of a random
	// one: ptds with stores of their own (regions) bootstrap the same
	// admin with it.
	Token string
	// Listen, when set, is the API's address (127.0.0.1:PORT) instead of
	// a free port picked at Start: a test that must name a ptd's URL to
	// another before either starts (regions) reserves it.
	Listen string
	// BinDir, when set, holds binaries Build made already: Start uses them
	// instead of building, and Stop leaves them (several daemons of one
	// test binary share one build). Inside Main it defaults to the main
	// daemon's binaries.
	BinDir string
	// DataDir, when set, is the data dir to use (it must exist): a test
	// that wants it on a filesystem of its own makes it. Stop empties it
	// but leaves the directory.
	DataDir string
	// Store is the metadata store: "sqlite" (ptd's default, in the data
	// dir) or "postgres" (a throwaway cluster started for this daemon and
	// stopped with it). Empty takes $PT_TEST_STORE, then sqlite.
	Store string
	// KeysFrom, when set, is the data dir of a ptd whose store this one
	// shares (--store in ExtraArgs): its secrets.key and preview.key are
	// copied into this daemon's data dir before it starts, as an operator
	// copies them (docs/operating.md), since a ptd whose keys are not the
	// platform's refuses to start on a shared PostgreSQL store.
	KeysFrom string
	// Warm names templates Main builds before the tests (Daemon.Warm): a
	// first build outlasts the waits the tests ask for.
	Warm []string
	// Subnet, when set, is the sandbox subnet instead of a random /24 (a
	// bench that runs more sandboxes than a /24 holds).
	Subnet string
}

// RepoRoot is the root module's directory: the nearest one above the
// working directory (a test's package directory) that holds go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
}

// StoreFromEnv is the store PT_TEST_STORE asks for: "sqlite" unless it
// says "postgres".
func StoreFromEnv() string {
	if os.Getenv("PT_TEST_STORE") == "postgres" {
		return "postgres"
	}
	return "sqlite"
}

// RandHex returns n random bytes as hex.
func RandHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Build compiles pt-agent (static), ptd and pt into a new temp dir.
func Build(repoRoot string) (string, error) {
	dir, err := os.MkdirTemp("", "pt-bin-")
	if err != nil {
		return "", err
	}
	for _, b := range []struct{ cgo, name, pkg, ldflags string }{
		{"CGO_ENABLED=0", "pt-agent", "./cmd/pt-agent", "-s -w"}, // as scripts/build.sh builds it
		{"", "ptd", "./cmd/ptd", ""},
		{"", "pt", "./cmd/pt", ""},
	} {
		cmd := exec.Command("go", "build", "-ldflags="+b.ldflags, "-o", filepath.Join(dir, b.name), b.pkg)
		cmd.Dir = repoRoot
		cmd.Env = os.Environ()
		if b.cgo != "" {
			cmd.Env = append(cmd.Env, b.cgo)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("build %s: %v\n%s", b.name, err, out)
		}
	}
	return dir, nil
}

// Start builds the binaries and starts ptd. Call Stop when done, also on
// failure (it is nil-safe).
func Start(o Options) (*Daemon, error) {
	if o.RepoRoot == "" {
		var err error
		if o.RepoRoot, err = RepoRoot(); err != nil {
			return nil, err
		}
	}
	bin, shared, built := o.BinDir, o.BinDir != "", o.BinDir == ""
	if built {
		if bin, shared = takeBuild(); !shared {
			var err error
			if bin, err = Build(o.RepoRoot); err != nil {
				return nil, err
			}
			builds.Lock()
			builds.users[bin] = 1
			builds.Unlock()
		}
	}
	d := &Daemon{BinDir: bin, keep: o.Keep, Env: o.Env, sharedBin: shared, builtBin: built, ownData: o.DataDir == ""}
	var err error
	if d.DataDir = o.DataDir; d.ownData {
		if d.DataDir, err = os.MkdirTemp("/var/tmp", "pt-data-"); err != nil {
			return d, err
		}
	}
	suffix := RandHex(3)
	d.Bridge = "ptt" + suffix
	d.Subnet = randomSubnet()
	if o.Subnet != "" {
		d.Subnet = o.Subnet
	}
	d.Cgroup = "/platinum-test-" + suffix
	if err := d.writeOwner(); err != nil {
		return d, err
	}
	if o.KeysFrom != "" {
		if err := CopyKeys(o.KeysFrom, d.DataDir); err != nil {
			return d, err
		}
	}
	sweepDead(filepath.Join(bin, "ptd"))
	d.Token = cmp.Or(o.Token, "pt_test_"+RandHex(16))
	d.args = []string{"serve", "--data-dir", d.DataDir, "--bridge", d.Bridge, "--subnet", d.Subnet,
		"--cgroup-parent", d.Cgroup, "--default-runtime", "runc"}
	if o.Store == "" {
		o.Store = StoreFromEnv()
	}
	switch o.Store {
	case "sqlite":
	case "postgres":
		if d.PG, err = pgtest.Start(context.Background()); err != nil {
			return d, fmt.Errorf("store postgres: %w", err)
		}
		if d.StoreURL, err = d.PG.CreateDatabase(context.Background(), "platinum"); err != nil {
			return d, err
		}
		d.args = append(d.args, "--store", d.StoreURL)
	default:
		return d, fmt.Errorf("unknown store %q: want sqlite or postgres", o.Store)
	}
	if d.logf, err = os.Create(d.logPath()); err != nil {
		return d, err
	}
	// A port FreeAddr found free can be taken before ptd binds it (another
	// test's listener, an outgoing connection's local port): pick new ones.
	base := d.args
	for attempt := 1; ; attempt++ {
		listen, err := d.pickAddrs(o.Listen)
		if err != nil {
			return d, err
		}
		d.args = append(append(slices.Clone(base), listen...), o.ExtraArgs...)
		err = d.launch()
		if err != nil && o.Subnet == "" && attempt < 3 && strings.Contains(err.Error(), "already uses address pool") {
			// Another test's ptd drew the same random subnet: draw again.
			d.Subnet = randomSubnet()
			base[slices.Index(base, "--subnet")+1] = d.Subnet
			if err := d.writeOwner(); err != nil {
				return d, err
			}
			continue
		}
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return d, err
		}
	}
}

// randomSubnet is a /24 in 100.70.0.0–100.95.255.0: away from the
// defaults (100.96/16 is only used by a real ptd) and from the network
// package's own tests.
func randomSubnet() string {
	n, _ := rand.Int(rand.Reader, big.NewInt(1<<16))
	return fmt.Sprintf("100.%d.%d.0/24", 70+n.Int64()%26, n.Int64()>>8)
}

// CopyKeys copies the platform's keys (secrets.key and preview.key, those
// that exist) from the data dir from into the data dir to, mode 0600.
func CopyKeys(from, to string) error {
	for _, name := range []string{"secrets.key", "preview.key"} {
		b, err := os.ReadFile(filepath.Join(from, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// pickAddrs chooses the API (listen, unless given), preview, SSH and
// metrics addresses and returns their flags.
func (d *Daemon) pickAddrs(listen string) ([]string, error) {
	addrs := []string{listen, "", "", ""}
	for i, a := range addrs {
		if a != "" {
			continue
		}
		var err error
		if addrs[i], err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	d.URL, d.PreviewURL, d.SSHAddr, d.MetricsURL = "http://"+addrs[0], "http://"+addrs[1], addrs[2], "http://"+addrs[3]
	return []string{"--listen", addrs[0], "--preview-listen", addrs[1], "--ssh-listen", addrs[2], "--metrics-listen", addrs[3]}, nil
}

// FreeAddr is a loopback address with a port free right now.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// launch starts the ptd process and waits until it is healthy, and sure
// that the ptd that answers is this one.
//
// ptd starts with SIGHUP and SIGINT ignored, as under `nohup` or as a
// shell script's background job, whose ignores pass to its children: the
// suites check that sandboxes' processes still end on both whatever ptd
// was started with (runc gives the container's init default dispositions;
// internal/agent/childsig.go says why the agent sees to its own children).
// The shell execs ptd, so the process is ptd's own.
func (d *Daemon) launch() error {
	d.cmd = exec.Command("sh", append([]string{"-c", `trap "" HUP INT; exec "$0" "$@"`, filepath.Join(d.BinDir, "ptd")}, d.args...)...)
	d.cmd.Env = append(append(os.Environ(), "PT_TOKEN="+d.Token), d.Env...)
	d.cmd.Stdout, d.cmd.Stderr = d.logf, d.logf
	exited, err := testproc.Start(d.cmd)
	if err != nil {
		return err
	}
	d.exited = exited
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(d.URL + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return d.checkOwnPort(exited)
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("ptd exited:\n%s", d.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("ptd did not become healthy:\n%s", d.Log())
}

// checkOwnPort makes sure the healthy ptd is this one: another test's
// ptd that took the port FreeAddr found free answers /healthz too, while
// this one exits on its bind. The kernel says whose socket listens on the
// port; when it is not this ptd's, this one is stopped if it has not
// exited, and the error asks Start for new ports.
func (d *Daemon) checkOwnPort(exited <-chan struct{}) error {
	u, err := url.Parse(d.URL)
	if err != nil {
		return err
	}
	own, known := listensOn(d.cmd.Process.Pid, u.Port())
	if own || !known {
		return nil
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-exited
	}
	return fmt.Errorf("another process answers on %s (address already in use)\n%s", d.URL, d.Log())
}

// listensOn reports whether process pid holds the socket listening on
// TCP port (decimal) in this network namespace; known is false when the
// kernel's tables could not be read or nothing listens there.
func listensOn(pid int, port string) (own, known bool) {
	p, err := strconv.Atoi(port)
	if err != nil {
		return false, false
	}
	hex := fmt.Sprintf("%04X", p)
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			if i := strings.LastIndexByte(f[1], ':'); i >= 0 && f[1][i+1:] == hex {
				inodes[f[9]] = true
			}
		}
	}
	if len(inodes) == 0 {
		return false, false
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false, true // gone: not its socket
	}
	for _, fd := range fds {
		link, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if strings.HasPrefix(link, "socket:[") && inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
			return true, true
		}
	}
	return false, true
}

// PID is ptd's process id (0 when it is not running).
func (d *Daemon) PID() int {
	if d.cmd == nil || d.cmd.Process == nil {
		return 0
	}
	select {
	case <-d.exited:
		return 0
	default:
		return d.cmd.Process.Pid
	}
}

// Kill ends ptd with SIGKILL, as a crash would: nothing is cleaned up.
func (d *Daemon) Kill() {
	d.cmd.Process.Kill()
	<-d.exited
}

// WaitExit waits up to timeout for ptd to end by itself (a crashpoint
// killing it) and reports whether it did.
func (d *Daemon) WaitExit(timeout time.Duration) bool {
	select {
	case <-d.exited:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Restart starts ptd again on the same data dir, address and token.
func (d *Daemon) Restart() error { return d.launch() }

// Log returns what ptd has logged so far.
func (d *Daemon) Log() string {
	b, _ := os.ReadFile(d.logPath())
	return string(b)
}

// Stop stops ptd, then `ptd reset` removes every sandbox, the bridge, the
// firewall chains, the disk pool and the cgroup parent it made.
func (d *Daemon) Stop() error {
	if d == nil {
		return nil
	}
	if d.cmd != nil && d.cmd.Process != nil {
		testproc.Stop(d.cmd.Process, d.exited, syscall.SIGTERM)
	}
	if d.logf != nil {
		d.logf.Close()
	}
	var err error
	if d.DataDir != "" && d.Bridge != "" {
		reset := exec.Command(filepath.Join(d.BinDir, "ptd"), "reset", "--data-dir", d.DataDir,
			"--bridge", d.Bridge, "--subnet", d.Subnet, "--cgroup-parent", d.Cgroup)
		if out, rerr := reset.CombinedOutput(); rerr != nil {
			err = fmt.Errorf("ptd reset: %v\n%s", rerr, out)
		} else if left := cgroupDirs(d.Cgroup); len(left) > 0 {
			// The parent is this daemon's alone: reset removes it unless
			// a sandbox's cgroup leaked below it.
			err = fmt.Errorf("ptd reset left the cgroup parent in %v", left)
		}
	}
	RemoveCgroup(d.Cgroup)
	if perr := d.PG.Stop(); perr != nil && err == nil {
		err = fmt.Errorf("stop postgres: %w", perr)
	}
	if !d.keep {
		if d.ownData {
			os.RemoveAll(d.DataDir)
		} else if entries, rerr := os.ReadDir(d.DataDir); rerr == nil {
			for _, e := range entries {
				os.RemoveAll(filepath.Join(d.DataDir, e.Name()))
			}
		}
		if d.sharedBin {
			os.Remove(d.logPath())
		}
		if d.builtBin {
			dropBuild(d.BinDir)
		}
	}
	return err
}

// logPath is where ptd's output goes: ptd.log in the binary dir, one per
// daemon when the dir is shared.
func (d *Daemon) logPath() string {
	if d.sharedBin {
		return filepath.Join(d.BinDir, "ptd-"+filepath.Base(d.DataDir)+"-"+d.Bridge+".log")
	}
	return filepath.Join(d.BinDir, "ptd.log")
}

// cgroupDirs is where cgroup path exists, in every hierarchy, v1 or v2.
func cgroupDirs(path string) []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + path)
	if _, err := os.Stat("/sys/fs/cgroup" + path); err == nil {
		dirs = append(dirs, "/sys/fs/cgroup"+path)
	}
	return dirs
}

// RemoveCgroup removes a cgroup and every (empty) cgroup below it in
// every hierarchy, v1 or v2. Deleted sandboxes' cgroups can take a moment
// to empty, so it retries for a few seconds.
func RemoveCgroup(path string) {
	if path == "" || path == "/" {
		return
	}
	dirs := cgroupDirs(path)
	deadline := time.Now().Add(5 * time.Second)
	for _, d := range dirs {
		for {
			var sub []string
			filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
				if err == nil && e.IsDir() {
					sub = append(sub, p)
				}
				return nil
			})
			for i := len(sub) - 1; i >= 0; i-- { // children first
				os.Remove(sub[i])
			}
			if _, err := os.Stat(d); os.IsNotExist(err) || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// mainBin is Main's daemon's binary dir, which every other Start of the
// test binary uses unless told otherwise; Main sets it before the tests
// run. builds counts the daemons using each build Start made, so that the
// last one's Stop removes it: a package may stop a daemon after Main's
// (tests/compat/e2b-code-interpreter's gVisor one), whose reset needs ptd.
// Both are guarded by builds' lock.
var (
	mainBin string
	builds  = struct {
		sync.Mutex
		users map[string]int
	}{users: map[string]int{}}
)

// takeBuild is mainBin with one more user, if Main has set it and its
// build is still there.
func takeBuild() (string, bool) {
	builds.Lock()
	defer builds.Unlock()
	if mainBin == "" || builds.users[mainBin] == 0 {
		return "", false
	}
	builds.users[mainBin]++
	return mainBin, true
}

// dropBuild is a Stop of a daemon using the build in dir: the last one
// removes it.
func dropBuild(dir string) {
	builds.Lock()
	defer builds.Unlock()
	if builds.users[dir]--; builds.users[dir] <= 0 {
		delete(builds.users, dir)
		os.RemoveAll(dir)
	}
}

// Main runs a test package against one ptd. Outside root it runs the tests
// with no daemon (they skip through their own check) unless CI=true, where
// that is a failure; as root it starts ptd, calls use (to record the
// daemon and prepare, e.g. build templates), runs the tests, prints the
// tail of ptd's log when they or the preparation fail, and stops and
// resets ptd: a stop that fails (its reset failed or left the cgroup
// parent behind) fails the package too.
func Main(m *testing.M, name string, o Options, use func(*Daemon) error) (code int) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, name+": must run as root in CI")
			return 1
		}
		return m.Run()
	}
	o.Keep = o.Keep || os.Getenv("PT_E2E_KEEP") != ""
	d, err := Start(o)
	if err == nil {
		// The package's other daemons share these binaries: a build links
		// three binaries, 5 s on an idle 2-core machine and several times
		// that under the rest of the suite, and tests/e2e starts a dozen
		// more daemons.
		builds.Lock()
		mainBin = d.BinDir
		builds.Unlock()
	}
	defer func() {
		if err := d.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, name+":", err)
			code = max(code, 1)
		}
	}()
	if err == nil {
		err = d.Warm(o.Warm...)
	}
	if err == nil {
		err = use(d)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		// A warm-up's create that ended in EOF was a ptd that died or a
		// handler that panicked: its log says which.
		printLog(name, d)
		return 1
	}
	code = m.Run()
	if code != 0 {
		printLog(name, d)
	}
	return code
}

// printLog shows a failed package the part of its ptd's log that explains
// the failure (PanicOrTail).
func printLog(name string, d *Daemon) {
	if d != nil {
		fmt.Fprintf(os.Stderr, "%s: ptd's log:\n%s\n", name, PanicOrTail(d.Log(), 60))
	}
}

// PanicOrTail is n lines of a ptd's log from its first panic (a handler's,
// which net/http logs and survives, or the process's), fatal error or data
// race, else its last n.
func PanicOrTail(s string, n int) string {
	for _, mark := range []string{"http: panic serving", "panic: ", "fatal error: ", "WARNING: DATA RACE"} {
		if i := strings.Index(s, mark); i >= 0 {
			i = strings.LastIndex(s[:i], "\n") + 1
			lines := strings.Split(s[i:], "\n")
			return strings.Join(lines[:min(n, len(lines))], "\n")
		}
	}
	return Tail(s, n)
}

// Tail is the last n lines of s (a ptd's log).
func Tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// StartTest starts a ptd with o for one test: stopped and reset when t
// ends, the last logLines lines of its log printed first when t failed
// (none for 0). A start that fails fails t.
func StartTest(t testing.TB, o Options, logLines int) *Daemon {
	t.Helper()
	d, err := Start(o)
	t.Cleanup(func() {
		if logLines > 0 && t.Failed() && d != nil {
			t.Logf("ptd log tail:\n%s", Tail(d.Log(), logLines))
		}
		if err := d.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// StartAdmission starts a second ptd for t, stopped and reset when t
// ends (its log printed when t failed), with one start slot (also while
// the host's CPU is busy, which a loaded test machine often is) and no
// start queue: a start that arrives while another is in flight is refused
// with a real 503 capacity (docs/stop-start.md).
func StartAdmission(t testing.TB, repoRoot string) *Daemon {
	t.Helper()
	d, err := Start(Options{RepoRoot: repoRoot, ExtraArgs: []string{"--pids-limit", "512",
		"--start-admission-slots", "1", "--start-admission-slots-saturated", "1", "--start-admission-max-queue", "0"}})
	t.Cleanup(func() {
		if t.Failed() && d != nil {
			t.Logf("ptd log:\n%s", d.Log())
		}
		if err := d.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatalf("start the admission ptd: %v", err)
	}
	return d
}
