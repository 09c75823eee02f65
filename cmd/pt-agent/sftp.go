package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pkg/sftp"
)

// stdio joins a process's stdin and stdout into the one connection an
// sftp server reads requests from and writes answers to.
type stdio struct {
	io.Reader
	io.Writer
}

// Close closes stdout, the side the client reads: the server calls it when
// it ends, and the client then sees the end of the stream.
func (s stdio) Close() error {
	if c, ok := s.Writer.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// sftpServer is `pt-agent sftp-server`: an SFTP server (github.com/pkg/sftp)
// on stdin and stdout, as OpenSSH's sftp-server is. ptd's SSH gateway runs
// it in the sandbox for the sftp subsystem (scp and sftp clients), through
// the processes service like any command, so every file operation happens
// on the sandbox's filesystem with its user's rights. Relative paths are
// relative to its working directory, the user's home.
func sftpServer(args []string, in io.Reader, out io.Writer) error {
	if len(args) != 0 {
		return errors.New("usage: pt-agent sftp-server (the protocol on stdin and stdout)")
	}
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("sftp-server: %w", err)
	}
	srv, err := sftp.NewServer(stdio{in, out}, sftp.WithServerWorkingDirectory(wd))
	if err != nil {
		return fmt.Errorf("sftp-server: %w", err)
	}
	defer srv.Close()
	if err := srv.Serve(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("sftp-server: %w", err)
	}
	return nil
}
