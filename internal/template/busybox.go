package template

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// busyboxPath is Debian busybox-static's binary. It must be static: the
// template has no libc for a dynamic one to load.
var busyboxPath = "/bin/busybox"

// BuildBusybox builds a minimal rootfs around the host's static busybox
// into dest (which must not exist or be empty): /bin/busybox with a symlink
// per applet, /usr/bin, /sbin and /usr/sbin pointing at /bin, users root
// and user (uid 1000, /home/user), and the usual empty mount points. It
// takes milliseconds, which is why tests use it instead of pt-base.
func BuildBusybox(ctx context.Context, dest string) error {
	if err := checkStatic(busyboxPath); err != nil {
		return err
	}
	applets, version, err := busyboxApplets(ctx, busyboxPath)
	if err != nil {
		return err
	}
	return publish(dest, func(dir string) error {
		return populateBusybox(dir, applets, version)
	})
}

func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("busybox: %w (install busybox-static)", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("busybox: %s is dynamically linked (install busybox-static)", path)
		}
	}
	return nil
}

func busyboxApplets(ctx context.Context, path string) (applets []string, version string, err error) {
	out, err := exec.CommandContext(ctx, path, "--list").Output()
	if err != nil {
		return nil, "", fmt.Errorf("busybox --list: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		name := strings.TrimSpace(sc.Text())
		if name == "" || name == "busybox" || strings.Contains(name, "/") {
			continue
		}
		applets = append(applets, name)
	}
	if len(applets) == 0 {
		return nil, "", fmt.Errorf("busybox --list: no applets")
	}
	// "BusyBox v1.35.0 (Debian 1:1.35.0-4+deb12u1+b1) multi-call binary."
	help, _ := exec.CommandContext(ctx, path, "--help").CombinedOutput()
	if f := strings.Fields(string(help)); len(f) >= 2 && f[0] == "BusyBox" {
		version = strings.TrimPrefix(f[1], "v")
	}
	return applets, version, nil
}

func populateBusybox(root string, applets []string, version string) error {
	dirs := []struct {
		path string
		mode os.FileMode
	}{
		{"bin", 0o755}, {"etc", 0o755}, {"root", 0o700}, {"home", 0o755},
		{"home/user", 0o755}, {"tmp", os.ModeSticky | 0o777}, {"proc", 0o555}, {"sys", 0o555},
		{"dev", 0o755}, {"run", 0o755}, {"var", 0o755}, {"var/tmp", os.ModeSticky | 0o777},
		{"mnt", 0o755}, {"usr", 0o755},
	}
	for _, d := range dirs {
		p := filepath.Join(root, d.path)
		if err := os.Mkdir(p, d.mode); err != nil {
			return fmt.Errorf("busybox rootfs: %w", err)
		}
		// Mkdir applies the umask and drops the sticky bit: set it exactly.
		if err := os.Chmod(p, d.mode); err != nil {
			return fmt.Errorf("busybox rootfs: %w", err)
		}
	}
	links := map[string]string{"sbin": "bin", "usr/bin": "../bin", "usr/sbin": "../bin"}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			return fmt.Errorf("busybox rootfs: %w", err)
		}
	}
	if err := copyFile(busyboxPath, filepath.Join(root, "bin/busybox"), 0o755); err != nil {
		return fmt.Errorf("busybox rootfs: %w", err)
	}
	for _, a := range applets {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil {
			return fmt.Errorf("busybox rootfs: applet %s: %w", a, err)
		}
	}
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n" +
			"user:x:1000:1000:user:/home/user:/bin/sh\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"etc/group": "root:x:0:\ntty:x:5:\nuser:x:1000:\nnogroup:x:65534:\n",
		"etc/hosts": defaultHosts,
		"etc/os-release": "NAME=\"BusyBox\"\nID=busybox\nVERSION_ID=\"" + version + "\"\n" +
			"PRETTY_NAME=\"Platinum busybox " + version + "\"\n",
		"etc/hostname":    "sandbox\n",
		"etc/resolv.conf": "",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("busybox rootfs: %w", err)
		}
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(filepath.Join(root, "home/user"), 1000, 1000); err != nil {
			return fmt.Errorf("busybox rootfs: %w", err)
		}
	}
	return nil
}

// defaultHosts is /etc/hosts for every template; the host layer may add the
// sandbox's own name on top.
const defaultHosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
