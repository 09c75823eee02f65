// Command floor is the least a Go init can do under agentstart: listen on
// PT_AGENT_ADDR (default :49983) and accept connections, nothing else. Its
// time to listening under runsc is what any Go agent pays before its own
// code runs (bench/README.md, "A gVisor init's start"); build it static:
// CGO_ENABLED=0 go build -o /tmp/floor ./bench/agentstart/floor.
package main

import (
	"net"
	"os"
)

func main() {
	addr := os.Getenv("PT_AGENT_ADDR")
	if addr == "" {
		addr = ":49983"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		c.Close()
	}
}
