package fuzzkit

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/platinum-dev/platinum/api/gen/filesystem"
	"github.com/platinum-dev/platinum/api/gen/filesystem/filesystemconnect"
	"github.com/platinum-dev/platinum/api/gen/process"
	"github.com/platinum-dev/platinum/api/gen/process/processconnect"
	"github.com/platinum-dev/platinum/internal/controlplane"
)

// LivePID is the one process the stand-in agent has running: input,
// signals and resizes reach it; any other pid is not found.
const LivePID = 7

// Host is an instant, in-process sandbox host: every call succeeds at
// once, the optional abilities the fuzzed routes reach are there
// (snapshots, disk images), and every sandbox's pt-agent and
// code-interpreter server are played by one stand-in on a loopback address
// of its own. The stand-in runs nothing and touches no file, so fuzzed
// commands and paths never reach the test machine (pt-agent's own decoders
// are fuzzed in internal/agent, confined to a temporary directory). It
// counts the calls that change something. Create it with NewHost.
type Host struct {
	dir   string
	addr  string
	calls atomic.Int64
}

var (
	_ controlplane.Host        = (*Host)(nil)
	_ controlplane.Snapshotter = (*Host)(nil)
)

// NewHost starts the stand-in agent and code-interpreter server on a loopback
// address of their own; tb's cleanup stops them.
func NewHost(tb testing.TB) *Host {
	tb.Helper()
	h := &Host{dir: tb.TempDir()}
	var agentLn, codeLn net.Listener
	var err error
	for range 20 {
		b := make([]byte, 3)
		rand.Read(b)
		addr := fmt.Sprintf("127.%d.%d.%d", b[0], b[1], max(b[2], 2))
		if agentLn, err = net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(controlplane.AgentPort))); err != nil {
			continue
		}
		if codeLn, err = net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(controlplane.CodeInterpreterPort))); err != nil {
			agentLn.Close()
			continue
		}
		h.addr = addr
		break
	}
	if err != nil {
		tb.Fatal(err)
	}
	agentSrv := &http.Server{Handler: standInAgent(), ReadHeaderTimeout: 10 * time.Second}
	codeSrv := &http.Server{Handler: standInCodeServer(), ReadHeaderTimeout: 10 * time.Second}
	go agentSrv.Serve(agentLn)
	go codeSrv.Serve(codeLn)
	tb.Cleanup(func() {
		agentSrv.Close()
		codeSrv.Close()
	})
	return h
}

// Calls is how many calls that change something the host has had.
func (h *Host) Calls() int64 { return h.calls.Load() }

// ID implements controlplane.Host.
func (h *Host) ID() string { return "host_fake" }

// Templates implements controlplane.Host.
func (h *Host) Templates() []string { return []string{"busybox", "pt-base", "code-interpreter"} }

// Classes implements controlplane.Host.
func (h *Host) Classes() []string { return []string{"runc", "gvisor"} }

// Info implements controlplane.Host.
func (h *Host) Info() controlplane.HostInfo { return controlplane.HostInfo{ID: "host_fake"} }

// BuildTemplate implements controlplane.Host: every build is ready at once.
func (h *Host) BuildTemplate(ctx context.Context, slug, versionID string, progress func(string)) (string, int64, error) {
	h.calls.Add(1)
	return "/templates/" + versionID, 1, nil
}

// Start implements controlplane.Host: the sandbox's agent is the stand-in.
func (h *Host) Start(ctx context.Context, spec controlplane.StartSpec) (controlplane.Instance, error) {
	h.calls.Add(1)
	return controlplane.Instance{Address: h.addr}, nil
}

// Running implements controlplane.Host.
func (h *Host) Running(ctx context.Context, id string) bool { return true }

// Stop implements controlplane.Host; memory is never kept.
func (h *Host) Stop(ctx context.Context, id string, keepMemory bool) (bool, error) {
	h.calls.Add(1)
	return false, nil
}

// Frozen implements controlplane.Host.
func (h *Host) Frozen(ctx context.Context, id string) bool { return false }

// DiskImage implements controlplane.Host: a 1 MiB sparse image per
// sandbox, so archives and backups have something to read.
func (h *Host) DiskImage(ctx context.Context, id string) (string, error) {
	p := h.DiskImagePath(id)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return p, f.Truncate(1 << 20)
}

// DiskImagePath implements controlplane.Host.
func (h *Host) DiskImagePath(id string) string { return filepath.Join(h.dir, id+".img") }

// RemoveDisk implements controlplane.Host.
func (h *Host) RemoveDisk(ctx context.Context, id string) error {
	h.calls.Add(1)
	return os.RemoveAll(h.DiskImagePath(id))
}

// Resize implements controlplane.Host.
func (h *Host) Resize(ctx context.Context, id string, cpu float64, ramMB int) error {
	h.calls.Add(1)
	return nil
}

// GrowDisk implements controlplane.Host.
func (h *Host) GrowDisk(ctx context.Context, id string, newGB int) error {
	h.calls.Add(1)
	return nil
}

// Metrics implements controlplane.Host.
func (h *Host) Metrics(ctx context.Context, id string) (controlplane.Metrics, error) {
	return controlplane.Metrics{MemoryLimitBytes: 512 << 20, At: time.Now()}, nil
}

// Destroy implements controlplane.Host.
func (h *Host) Destroy(ctx context.Context, id string) error {
	h.calls.Add(1)
	return nil
}

// MemorySnapshots implements controlplane.Snapshotter: never.
func (h *Host) MemorySnapshots(class string) (bool, string) {
	return false, "the fake host keeps no memory"
}

// Snapshot implements controlplane.Snapshotter.
func (h *Host) Snapshot(ctx context.Context, id, snapID, class string, memory bool) (controlplane.SnapshotFiles, error) {
	h.calls.Add(1)
	return controlplane.SnapshotFiles{DiskImage: filepath.Join(h.dir, snapID+".img"), SizeBytes: 1 << 20}, nil
}

// RemoveSnapshot implements controlplane.Snapshotter.
func (h *Host) RemoveSnapshot(ctx context.Context, snapID string) error {
	h.calls.Add(1)
	return nil
}

// RestoreDisk implements controlplane.Snapshotter.
func (h *Host) RestoreDisk(ctx context.Context, id, snapID string) error {
	h.calls.Add(1)
	return nil
}

// standInAgent answers the pt-agent routes the control plane calls: every
// process started ends at once with status 0, LivePID is running,
// directories are made, and every export is a five-byte file.
func standInAgent() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(processconnect.NewProcessHandler(processes{}))
	mux.Handle(filesystemconnect.NewFilesystemHandler(files{}))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /code/ready", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("POST /init", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /artifact", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("hello")) })
	mux.HandleFunc("POST /files", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("[]")) })
	return mux
}

type processes struct {
	processconnect.UnimplementedProcessHandler
}

func (processes) Start(ctx context.Context, req *connect.Request[process.StartRequest], out *connect.ServerStream[process.StartResponse]) error {
	if err := out.Send(&process.StartResponse{Event: &process.ProcessEvent{Event: &process.ProcessEvent_Start{
		Start: &process.ProcessEvent_StartEvent{Pid: LivePID + 1, Cwd: req.Msg.GetProcess().GetCwd()}}}}); err != nil {
		return err
	}
	return out.Send(&process.StartResponse{Event: &process.ProcessEvent{Event: &process.ProcessEvent_End{
		End: &process.ProcessEvent_EndEvent{Exited: true, Status: "exit status 0"}}}})
}

func (processes) List(context.Context, *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	return connect.NewResponse(&process.ListResponse{Processes: []*process.ProcessInfo{{Pid: LivePID,
		Config: &process.ProcessConfig{Cmd: "sleep", Args: []string{"60"}}, Stdin: true}}}), nil
}

// live refuses every process but LivePID, as pt-agent does.
func live(sel *process.ProcessSelector) error {
	if sel.GetPid() != LivePID {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("process %d not found", sel.GetPid()))
	}
	return nil
}

func (processes) SendInput(_ context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	return connect.NewResponse(&process.SendInputResponse{}), live(req.Msg.GetProcess())
}

func (processes) CloseStdin(_ context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	return connect.NewResponse(&process.CloseStdinResponse{}), live(req.Msg.GetProcess())
}

func (processes) SendSignal(_ context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	return connect.NewResponse(&process.SendSignalResponse{}), live(req.Msg.GetProcess())
}

func (processes) Update(_ context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	if err := live(req.Msg.GetProcess()); err != nil {
		return nil, err
	}
	return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no pty", LivePID))
}

type files struct {
	filesystemconnect.UnimplementedFilesystemHandler
}

func (files) MakeDir(_ context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	p := filepath.Clean("/" + req.Msg.GetPath())
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: &filesystem.EntryInfo{
		Name: filepath.Base(p), Path: p, Type: filesystem.FileType_FILE_TYPE_DIRECTORY}}), nil
}

// standInCodeServer answers the code-interpreter routes the API relays: a
// cell ends at once, contexts are made and listed.
func standInCodeServer() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/execute", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintln(w, `{"type":"end","context_id":"default-python","execution_count":1,"status":"ok","duration_ms":1}`)
	})
	mux.HandleFunc("POST /v1/contexts", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "ctx_1", "language": "python", "cwd": "/home/user"})
	})
	mux.HandleFunc("GET /v1/contexts", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("[]"))
	})
	return mux
}
