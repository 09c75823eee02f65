package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/platinum-dev/platinum/api/gen/filesystem"
	"github.com/platinum-dev/platinum/api/gen/process"
)

// envdWire is E2B envd's process and filesystem schema as the stock e2b
// SDK speaks it (../shared/reference/e2b.md §3.2–3.3): packages, services,
// streaming shapes, message, field and enum names, numbers and types. A
// difference here breaks the real SDK against pt-agent.
const envdWire = `package process
process.PTY { process.PTY.Size size=1; }
process.PTY.Size { uint32 cols=1; uint32 rows=2; }
process.ProcessConfig { string cmd=1; repeated string args=2; map<string,string> envs=3; optional string cwd=4; }
process.ListRequest { }
process.ProcessInfo { process.ProcessConfig config=1; uint32 pid=2; optional string tag=3; }
process.ListResponse { repeated process.ProcessInfo processes=1; }
process.StartRequest { process.ProcessConfig process=1; optional process.PTY pty=2; optional string tag=3; optional bool stdin=4; }
process.UpdateRequest { process.ProcessSelector process=1; optional process.PTY pty=2; }
process.UpdateResponse { }
process.ProcessEvent { oneof event process.ProcessEvent.StartEvent start=1; oneof event process.ProcessEvent.DataEvent data=2; oneof event process.ProcessEvent.EndEvent end=3; oneof event process.ProcessEvent.KeepAlive keepalive=4; }
process.ProcessEvent.StartEvent { uint32 pid=1; }
process.ProcessEvent.DataEvent { oneof output bytes stdout=1; oneof output bytes stderr=2; oneof output bytes pty=3; }
process.ProcessEvent.EndEvent { sint32 exit_code=1; bool exited=2; string status=3; optional string error=4; }
process.ProcessEvent.KeepAlive { }
process.StartResponse { process.ProcessEvent event=1; }
process.ConnectResponse { process.ProcessEvent event=1; }
process.SendInputRequest { process.ProcessSelector process=1; process.ProcessInput input=2; }
process.SendInputResponse { }
process.ProcessInput { oneof input bytes stdin=1; oneof input bytes pty=2; }
process.StreamInputRequest { oneof event process.StreamInputRequest.StartEvent start=1; oneof event process.StreamInputRequest.DataEvent data=2; oneof event process.StreamInputRequest.KeepAlive keepalive=3; }
process.StreamInputRequest.StartEvent { process.ProcessSelector process=1; }
process.StreamInputRequest.DataEvent { process.ProcessInput input=2; }
process.StreamInputRequest.KeepAlive { }
process.StreamInputResponse { }
process.SendSignalRequest { process.ProcessSelector process=1; process.Signal signal=2; }
process.SendSignalResponse { }
process.CloseStdinRequest { process.ProcessSelector process=1; }
process.CloseStdinResponse { }
process.ConnectRequest { process.ProcessSelector process=1; }
process.ProcessSelector { oneof selector uint32 pid=1; oneof selector string tag=2; }
enum process.Signal { SIGNAL_UNSPECIFIED=0; SIGNAL_SIGTERM=15; SIGNAL_SIGKILL=9; }
rpc process.Process.List(process.ListRequest) process.ListResponse
rpc process.Process.Connect(process.ConnectRequest) stream process.ConnectResponse
rpc process.Process.Start(process.StartRequest) stream process.StartResponse
rpc process.Process.Update(process.UpdateRequest) process.UpdateResponse
rpc process.Process.StreamInput(stream process.StreamInputRequest) process.StreamInputResponse
rpc process.Process.SendInput(process.SendInputRequest) process.SendInputResponse
rpc process.Process.SendSignal(process.SendSignalRequest) process.SendSignalResponse
rpc process.Process.CloseStdin(process.CloseStdinRequest) process.CloseStdinResponse
package filesystem
filesystem.MoveRequest { string source=1; string destination=2; }
filesystem.MoveResponse { filesystem.EntryInfo entry=1; }
filesystem.MakeDirRequest { string path=1; }
filesystem.MakeDirResponse { filesystem.EntryInfo entry=1; }
filesystem.RemoveRequest { string path=1; }
filesystem.RemoveResponse { }
filesystem.StatRequest { string path=1; }
filesystem.StatResponse { filesystem.EntryInfo entry=1; }
filesystem.EntryInfo { string name=1; filesystem.FileType type=2; string path=3; int64 size=4; uint32 mode=5; string permissions=6; string owner=7; string group=8; google.protobuf.Timestamp modified_time=9; optional string symlink_target=10; map<string,string> metadata=11; }
filesystem.ListDirRequest { string path=1; uint32 depth=2; }
filesystem.ListDirResponse { repeated filesystem.EntryInfo entries=1; }
filesystem.WatchDirRequest { string path=1; bool recursive=2; bool include_entry=3; bool allow_network_mounts=4; }
filesystem.FilesystemEvent { string name=1; filesystem.EventType type=2; optional filesystem.EntryInfo entry=3; }
filesystem.WatchDirResponse { oneof event filesystem.WatchDirResponse.StartEvent start=1; oneof event filesystem.FilesystemEvent filesystem=2; oneof event filesystem.WatchDirResponse.KeepAlive keepalive=3; }
filesystem.WatchDirResponse.StartEvent { }
filesystem.WatchDirResponse.KeepAlive { }
filesystem.CreateWatcherRequest { string path=1; bool recursive=2; bool include_entry=3; bool allow_network_mounts=4; }
filesystem.CreateWatcherResponse { string watcher_id=1; }
filesystem.GetWatcherEventsRequest { string watcher_id=1; }
filesystem.GetWatcherEventsResponse { repeated filesystem.FilesystemEvent events=1; }
filesystem.RemoveWatcherRequest { string watcher_id=1; }
filesystem.RemoveWatcherResponse { }
enum filesystem.FileType { FILE_TYPE_UNSPECIFIED=0; FILE_TYPE_FILE=1; FILE_TYPE_DIRECTORY=2; FILE_TYPE_SYMLINK=3; }
enum filesystem.EventType { EVENT_TYPE_UNSPECIFIED=0; EVENT_TYPE_CREATE=1; EVENT_TYPE_WRITE=2; EVENT_TYPE_REMOVE=3; EVENT_TYPE_RENAME=4; EVENT_TYPE_CHMOD=5; }
rpc filesystem.Filesystem.Stat(filesystem.StatRequest) filesystem.StatResponse
rpc filesystem.Filesystem.MakeDir(filesystem.MakeDirRequest) filesystem.MakeDirResponse
rpc filesystem.Filesystem.Move(filesystem.MoveRequest) filesystem.MoveResponse
rpc filesystem.Filesystem.ListDir(filesystem.ListDirRequest) filesystem.ListDirResponse
rpc filesystem.Filesystem.Remove(filesystem.RemoveRequest) filesystem.RemoveResponse
rpc filesystem.Filesystem.WatchDir(filesystem.WatchDirRequest) stream filesystem.WatchDirResponse
rpc filesystem.Filesystem.CreateWatcher(filesystem.CreateWatcherRequest) filesystem.CreateWatcherResponse
rpc filesystem.Filesystem.GetWatcherEvents(filesystem.GetWatcherEventsRequest) filesystem.GetWatcherEventsResponse
rpc filesystem.Filesystem.RemoveWatcher(filesystem.RemoveWatcherRequest) filesystem.RemoveWatcherResponse
`

// extensionFloor is the first field number of Platinum's own additions to
// envd's messages: envd clients never send them and skip them as unknown
// fields when they receive them, so they stay out of envdWire.
const extensionFloor = 1000

// platinumExtensions pins those additions, so one is not added (or
// renumbered below the floor) by accident.
const platinumExtensions = `process.ProcessInfo bool pty=1000
process.ProcessInfo string cwd=1001
process.ProcessInfo bool stdin=1002
process.StartRequest uint32 timeout_ms=1000
process.ProcessEvent.StartEvent string cwd=1000
process.ProcessEvent.EndEvent bool timed_out=1000
`

// describe writes fd's wire-relevant schema, one line per message, enum
// and RPC, in declaration order; fields numbered extensionFloor and up go
// to ext instead.
func describe(b, ext *strings.Builder, fd protoreflect.FileDescriptor) {
	fmt.Fprintln(b, "package", fd.Package())
	var msgs func(ms protoreflect.MessageDescriptors)
	msgs = func(ms protoreflect.MessageDescriptors) {
		for i := 0; i < ms.Len(); i++ {
			m := ms.Get(i)
			if m.IsMapEntry() {
				continue
			}
			s := string(m.FullName()) + " {"
			for j := 0; j < m.Fields().Len(); j++ {
				f := m.Fields().Get(j)
				k := f.Kind().String()
				if f.Message() != nil {
					k = string(f.Message().FullName())
				}
				if f.Enum() != nil {
					k = string(f.Enum().FullName())
				}
				if f.IsMap() {
					k = fmt.Sprintf("map<%s,%s>", f.MapKey().Kind(), f.MapValue().Kind())
				}
				lbl := ""
				if f.IsList() {
					lbl = "repeated "
				}
				if f.HasOptionalKeyword() {
					lbl = "optional "
				}
				if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
					lbl = "oneof " + string(o.Name()) + " "
				}
				if f.Number() >= extensionFloor {
					fmt.Fprintf(ext, "%s %s%s %s=%d\n", m.FullName(), lbl, k, f.Name(), f.Number())
					continue
				}
				s += fmt.Sprintf(" %s%s %s=%d;", lbl, k, f.Name(), f.Number())
			}
			fmt.Fprintln(b, s+" }")
			msgs(m.Messages())
		}
	}
	msgs(fd.Messages())
	for i := 0; i < fd.Enums().Len(); i++ {
		e := fd.Enums().Get(i)
		s := "enum " + string(e.FullName()) + " {"
		for j := 0; j < e.Values().Len(); j++ {
			v := e.Values().Get(j)
			s += fmt.Sprintf(" %s=%d;", v.Name(), v.Number())
		}
		fmt.Fprintln(b, s+" }")
	}
	for i := 0; i < fd.Services().Len(); i++ {
		sv := fd.Services().Get(i)
		for j := 0; j < sv.Methods().Len(); j++ {
			m := sv.Methods().Get(j)
			fmt.Fprintf(b, "rpc %s.%s(%v%s) %v%s\n", sv.FullName(), m.Name(), map[bool]string{true: "stream "}[m.IsStreamingClient()], m.Input().FullName(), map[bool]string{true: "stream "}[m.IsStreamingServer()], m.Output().FullName())
		}
	}
}

// TestEnvdWireCompatible fails when pt-agent's generated protos drift from
// envd's wire schema.
func TestEnvdWireCompatible(t *testing.T) {
	var b, ext strings.Builder
	describe(&b, &ext, process.File_process_process_proto)
	describe(&b, &ext, filesystem.File_filesystem_filesystem_proto)
	if diff := cmp.Diff(envdWire, b.String()); diff != "" {
		t.Errorf("pt-agent's protos differ from envd's wire schema (-envd +ours):\n%s", diff)
	}
	if diff := cmp.Diff(platinumExtensions, ext.String()); diff != "" {
		t.Errorf("Platinum's extension fields changed (-pinned +ours):\n%s", diff)
	}
}
