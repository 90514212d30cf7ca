package initproc

import (
	"context"
	"io"
	"net"
)

// serveForward is a placeholder relay until the forwarder package lands.
func serveForward(ctx context.Context, ln net.Listener, socket string) {
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("unix", socket)
			if err != nil {
				return
			}
			defer u.Close()
			go io.Copy(u, c)
			io.Copy(c, u)
		}()
	}
}
