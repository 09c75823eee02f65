package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// identity gives a sandbox that was copied from another (a clone or a
// fork) its own identity: hostname (UTS and /etc/hostname, /etc/hosts), a
// fresh /etc/machine-id, and new entropy mixed into the kernel's pool, so
// copies never share what should be unique (Firecracker's warning about
// restoring one snapshot many times). The host runs it once after the
// copy starts, as `pt-agent identity <hostname>`, with CAP_SYS_ADMIN.
func identity(args []string) error {
	if len(args) != 1 || args[0] == "" {
		return errors.New("usage: pt-agent identity <hostname>")
	}
	name := args[0]
	if err := unix.Sethostname([]byte(name)); err != nil {
		return fmt.Errorf("identity: sethostname: %w", err)
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	files := []struct{ path, content string }{
		{"/etc/hostname", name + "\n"},
		{"/etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + name + "\n"},
		{"/etc/machine-id", hex.EncodeToString(id) + "\n"},
	}
	for _, f := range files {
		if err := writeReplace(f.path, f.content); err != nil {
			return fmt.Errorf("identity: %w", err)
		}
	}
	if err := reseed(); err != nil {
		return fmt.Errorf("identity: entropy: %w", err)
	}
	return nil
}

// syncAll flushes every filesystem (`pt-agent sync`): in gVisor that
// writes the sentry's cached file data through to the host files, so a
// disk snapshot taken right after sees it.
func syncAll() error {
	unix.Sync()
	return nil
}

// writeReplace replaces path's content through a rename, so a reader
// never sees a half-written file.
func writeReplace(path, content string) error {
	tmp := path + ".pt-new"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// randPoolInfo is struct rand_pool_info for RNDADDENTROPY.
type randPoolInfo struct {
	entropyCount int32
	bufSize      int32
	buf          [64]byte
}

// reseed mixes 64 fresh random bytes (from the host's getrandom) into the
// sandbox kernel's pool, credited with RNDADDENTROPY where the kernel
// allows it and written to /dev/urandom (mixed, uncredited) otherwise.
func reseed() error {
	var info randPoolInfo
	if _, err := rand.Read(info.buf[:]); err != nil {
		return err
	}
	info.bufSize = int32(len(info.buf))
	info.entropyCount = int32(len(info.buf) * 8)
	f, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.RNDADDENTROPY, uintptr(unsafe.Pointer(&info)))
	if errno == 0 {
		return nil
	}
	_, err = f.Write(info.buf[:])
	return err
}
