// The Go peer of ferry-bench's net experiment: an echo server with a
// goroutine per connection, serving the listening socket its parent left
// open as descriptor -fd (backlog set by the parent). It writes one ready
// byte "R" to stdout and serves until it is killed. Each goroutine echoes
// what one Read returns with one Write, from a 4 KiB buffer; Go sets
// TCP_NODELAY on every TCP connection and raises the soft RLIMIT_NOFILE to
// the hard limit at start (since Go 1.19), as the Rust servers do by hand.
// GOMAXPROCS is Go's default, the CPUs of the affinity mask.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
)

func echo(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func main() {
	fd := flag.Int("fd", -1, "the listening socket's descriptor")
	flag.Parse()
	if *fd < 0 {
		fmt.Fprintln(os.Stderr, "echo: -fd is needed")
		os.Exit(2)
	}
	l, err := net.FileListener(os.NewFile(uintptr(*fd), "listener"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo: listener:", err)
		os.Exit(1)
	}
	os.Stdout.Write([]byte("R"))
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go echo(c)
	}
}
