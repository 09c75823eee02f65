package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxSnapshot is `pt sandbox snapshot ID [--name N] [--memory auto|on|off]`.
type sandboxSnapshot struct{ app *app }

const sandboxSnapshotSynopsis = "pt sandbox snapshot ID [--name N] [--memory auto|on|off] [--idempotency-key K] [--json]\n\n" +
	"  snapshot a running or stopped sandbox: its disk, and its memory where its runtime can (gvisor)."

// bind binds the flags; the returned run takes the snapshot and prints its
// ID (it is ready when this returns).
func (c *sandboxSnapshot) bind(fs *flag.FlagSet) runFunc {
	var name, memory, key string
	var asJSON bool
	fs.StringVar(&name, "name", "", "name of the snapshot")
	fs.StringVar(&memory, "memory", "auto", "auto: memory where the runtime can; on: insist; off: disk only")
	fs.StringVar(&key, "idempotency-key", "", "a retry with the same key returns the first snapshot")
	fs.BoolVar(&asJSON, "json", false, "print the snapshot as JSON")
	opts := platinum.SnapshotOptions{}
	check := checks(oneSandboxID, func(in *input) error {
		opts = platinum.SnapshotOptions{Name: name, IdempotencyKey: key}
		switch memory {
		case "auto":
		case "on", "true":
			opts.Memory = new(bool)
			*opts.Memory = true
		case "off", "false":
			opts.Memory = new(bool)
		default:
			return in.usageErr("--memory must be auto, on or off")
		}
		return nil
	})
	return callRun(c.app, check, func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Snapshot, error) {
		return cl.Sandboxes.Snapshot(ctx, pos[0], opts)
	}, jsonOrLine(c.app, &asJSON, func(snap *platinum.Snapshot) string {
		return fmt.Sprintf("snapshot %s of %s: %s (%s)", snap.ID, snap.SandboxID, snap.State, snapshotWhat(snap))
	}))
}

func snapshotWhat(s *platinum.Snapshot) string {
	if s.Kind == "backup" {
		return "disk, off-host"
	}
	if s.Memory {
		return "disk and memory"
	}
	return "disk only"
}

// sandboxRestore is `pt sandbox restore ID SNAPSHOT [--wait]`.
type sandboxRestore struct{ app *app }

const sandboxRestoreSynopsis = "pt sandbox restore ID SNAPSHOT_ID [--wait] [--timeout 10m] [--json]\n\n" +
	"  roll a sandbox back to one of its snapshots (disk, and memory when the snapshot has it)."

// bind binds the flags; the returned run starts the restore and, with
// --wait, follows it until the sandbox runs again.
func (c *sandboxRestore) bind(fs *flag.FlagSet) runFunc {
	var wait, asJSON bool
	var timeout time.Duration
	fs.BoolVar(&wait, "wait", false, "wait until the sandbox runs again")
	fs.DurationVar(&timeout, "timeout", 10*time.Minute, "how long --wait waits")
	fs.BoolVar(&asJSON, "json", false, "print the sandbox as JSON")
	return callRun(c.app, exactArgs(2, "want a sandbox ID and a snapshot ID"), func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Sandbox, error) {
		var opts []platinum.LifecycleOption
		if wait {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
			opts = append(opts, platinum.WaitForRunning(timeout))
			fmt.Fprintf(c.app.stderr, "sandbox %s: restoring %s…\n", pos[0], pos[1])
		}
		return cl.Sandboxes.Restore(ctx, pos[0], pos[1], opts...)
	}, func(sb *platinum.Sandbox) error {
		if asJSON {
			return printSandbox(c.app.stdout, sb, true)
		}
		fmt.Fprintf(c.app.stdout, "sandbox %s: %s\n", sb.ID, sb.State)
		if sb.Restore != nil && sb.State == platinum.StateRunning {
			fmt.Fprintln(c.app.stdout, restoredLine(*sb.Restore))
		}
		return nil
	})
}

// sandboxFork is `pt sandbox fork ID [-n N] [--no-parent] [--wait]`.
type sandboxFork struct{ app *app }

const sandboxForkSynopsis = "pt sandbox fork ID [-n 1] [--no-parent] [--wait] [--idempotency-key K] [--json]\n\n" +
	"  make N running copies of a running sandbox, each with its own identity, address and token."

// bind binds the flags; the returned run forks and prints one line per copy.
func (c *sandboxFork) bind(fs *flag.FlagSet) runFunc {
	var n int
	var noParent, wait, asJSON bool
	var key string
	fs.IntVar(&n, "n", 1, "how many copies (1 to 20)")
	fs.BoolVar(&noParent, "no-parent", false, "make the copies top-level sandboxes, not children of the source")
	fs.BoolVar(&wait, "wait", false, "wait until every copy runs")
	fs.StringVar(&key, "idempotency-key", "", "a retry with the same key returns the first copies")
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return callRun(c.app, oneSandboxID, func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.ForkResult, error) {
		if wait {
			fmt.Fprintf(c.app.stderr, "sandbox %s: forking %d…\n", pos[0], n)
		}
		return cl.Sandboxes.Fork(ctx, pos[0], platinum.ForkOptions{Count: n, NoParent: noParent, Wait: wait, IdempotencyKey: key})
	}, jsonOr(c.app, &asJSON, func(res *platinum.ForkResult) error {
		what := "memory"
		if !res.Memory {
			what = "disk only"
		}
		fmt.Fprintf(c.app.stdout, "forked %s ×%d (%s)\n", res.SourceID, len(res.Sandboxes), what)
		if res.MemoryReason != "" {
			fmt.Fprintf(c.app.stderr, "note: %s\n", res.MemoryReason)
		}
		for _, sb := range res.Sandboxes {
			fmt.Fprintf(c.app.stdout, "%s\t%s\n", sb.ID, sb.State)
		}
		return nil
	}))
}

// sandboxBackup is `pt sandbox backup ID [--name N] [--wait]`.
type sandboxBackup struct{ app *app }

const sandboxBackupSynopsis = "pt sandbox backup ID [--name N] [--wait] [--timeout 30m] [--idempotency-key K] [--json]\n\n" +
	"  copy a sandbox's disk to the object store (bkp_…), restorable on any host with\n" +
	"  `pt sandbox create --from-backup`."

// bind binds the flags; the returned run starts the backup and, with --wait,
// shows its upload until complete.
func (c *sandboxBackup) bind(fs *flag.FlagSet) runFunc {
	var name, key string
	var wait, asJSON bool
	var timeout time.Duration
	fs.StringVar(&name, "name", "", "name of the backup")
	fs.BoolVar(&wait, "wait", false, "wait until the backup is complete, showing its progress")
	fs.DurationVar(&timeout, "timeout", 30*time.Minute, "how long --wait waits")
	fs.StringVar(&key, "idempotency-key", "", "a retry with the same key returns the first backup")
	fs.BoolVar(&asJSON, "json", false, "print the backup as JSON")
	return callRun(c.app, oneSandboxID, func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Snapshot, error) {
		opts := platinum.BackupOptions{Name: name, Wait: wait, IdempotencyKey: key}
		if wait {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
			last := int64(-2)
			opts.OnProgress = func(s *platinum.Snapshot) {
				if pct := s.Progress.Percent(); pct != last {
					last = pct
					line := string(s.State)
					if pct >= 0 {
						line = fmt.Sprintf("uploading %d%% (%d of %d MB)", pct, s.Progress.DoneBytes>>20, s.Progress.TotalBytes>>20)
					}
					fmt.Fprintf(c.app.stderr, "backup %s: %s\n", s.ID, line)
				}
			}
		}
		return cl.Sandboxes.Backup(ctx, pos[0], opts)
	}, jsonOrLine(c.app, &asJSON, func(snap *platinum.Snapshot) string {
		return fmt.Sprintf("backup %s of %s: %s", snap.ID, snap.SandboxID, snap.State)
	}))
}

// snapshotList is `pt snapshot list SANDBOX_ID [--backups]`.
type snapshotList struct{ app *app }

const snapshotListSynopsis = "pt snapshot list SANDBOX_ID [--backups] [--json]\n\n  list a sandbox's snapshots (or backups)."

// bind binds the flags; the returned run prints a table of snapshots, newest
// first.
func (c *snapshotList) bind(fs *flag.FlagSet) runFunc {
	var backups, asJSON bool
	fs.BoolVar(&backups, "backups", false, "list backups instead of snapshots")
	fs.BoolVar(&asJSON, "json", false, "print the list as JSON")
	return callRun(c.app, oneSandboxID, func(ctx context.Context, cl *platinum.Client, pos []string) ([]platinum.Snapshot, error) {
		list := cl.Sandboxes.ListSnapshots
		if backups {
			list = cl.Sandboxes.ListBackups
		}
		return list(ctx, pos[0])
	}, jsonOr(c.app, &asJSON, func(rows []platinum.Snapshot) error {
		return writeTable(narrowTable(c.app.stdout), "ID\tNAME\tSTATE\tCONTENT\tSIZE\tCREATED", rows, func(s *platinum.Snapshot) []string {
			return []string{s.ID, orDash(s.Name), string(s.State), snapshotWhat(s), fmt.Sprintf("%d MB", s.SizeBytes>>20),
				s.CreatedAt.Format(time.RFC3339)}
		})
	}))
}

// snapshotRm is `pt snapshot rm ID [ID...]`.
type snapshotRm struct{ app *app }

const snapshotRmSynopsis = "pt snapshot rm SNAPSHOT_ID [SNAPSHOT_ID...]\n\n  delete snapshots or backups."

// bind binds the flags; the returned run deletes each snapshot, reporting
// every failure.
func (c *snapshotRm) bind(fs *flag.FlagSet) runFunc {
	return callRun(c.app, someArgs("want at least one snapshot ID"), func(ctx context.Context, cl *platinum.Client, pos []string) (struct{}, error) {
		failed := 0
		for _, id := range pos {
			if err := cl.Sandboxes.DeleteSnapshot(ctx, id); err != nil {
				fmt.Fprintf(c.app.stderr, "pt: %s: %s\n", id, message(err))
				failed++
				continue
			}
			fmt.Fprintf(c.app.stdout, "deleted %s\n", id)
		}
		if failed > 0 {
			return struct{}{}, &exitError{code: 1}
		}
		return struct{}{}, nil
	}, noOutput)
}
