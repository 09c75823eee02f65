package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestDiskAutogrow: with --disk-autogrow-max-gb (docs/resize.md's
// limits.disk_autogrow_max_gb) a running sandbox whose disk passes 90%
// used grows by half and at least 10 GB, up to the limit, online (its df
// sees it), and is billed at the new size from then on. (The cap and the
// 90% line are table-tested in internal/controlplane, TestDiskAutogrow.)
func TestDiskAutogrow(t *testing.T) {
	requireEnv(t)
	d, err := ptdtest.Start(ptdtest.Options{ExtraArgs: []string{"--pids-limit", "256",
		"--disk-autogrow-max-gb", "11", "--timer-interval", "200ms"}})
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("second ptd: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("second ptd: %v", err)
	}
	ctx := context.Background()
	cl := platinum.New(d.URL, d.Token)
	sb, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", DiskGB: 1}, platinum.WaitForRunning(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), sb.ID) })
	sh := func(script string) string {
		t.Helper()
		res, err := cl.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: script})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %+v %v", script, res, err)
		}
		return res.Stdout
	}
	sizeKB := func() int {
		f := strings.Fields(strings.TrimSpace(sh("df -k / | tail -1")))
		n, _ := strconv.Atoi(f[1])
		return n
	}
	before := sizeKB()
	// Below 90% nothing grows.
	time.Sleep(time.Second)
	if got, _ := cl.Sandboxes.Get(ctx, sb.ID); got.DiskGB != 1 {
		t.Fatalf("grew before the disk filled: %d GB", got.DiskGB)
	}
	// Fill past 90%, leaving a few MB free.
	sh(`avail=$(df -k / | awk 'NR==2{print $4}'); dd if=/dev/zero of=/root/fill bs=1M count=$((avail/1024 - 8)) 2>/dev/null; sync`)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := cl.Sandboxes.Get(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.DiskGB == 11 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the disk never grew: %d GB", got.DiskGB)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if after := sizeKB(); after < before+9*1024*1024 {
		t.Errorf("df inside: %d KB → %d KB, want about 10 GB more", before, after)
	}
	u, err := cl.Sandboxes.Usage(ctx, sb.ID, time.Time{}, time.Time{})
	if err != nil || len(u.Periods) < 2 || u.Periods[0].DiskGB != 1 || u.Periods[len(u.Periods)-1].DiskGB != 11 {
		t.Errorf("usage periods: %+v %v", u, err)
	}
}
