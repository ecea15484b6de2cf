package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

func runAPIProxy(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("node-helper apiproxy", flag.ContinueOnError)
	listen := fs.String("listen", "", "address to accept pods' connections on: the kubernetes Service's ClusterIP:port, on the node's bridge (required)")
	to := fs.String("to", "", "the API server's loopback host:port (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *listen == "" || *to == "" {
		return errors.New("apiproxy: -listen and -to are required")
	}
	if host, _, err := net.SplitHostPort(*to); err != nil || !net.ParseIP(host).IsLoopback() {
		return fmt.Errorf("apiproxy: -to %q must be a loopback host:port", *to)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("apiproxy: %w", err)
	}
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	fmt.Printf("apiproxy %s -> %s\n", *listen, *to)
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("apiproxy: %w", err)
		}
		go forward(c, *to)
	}
}

// forward copies both ways until either side closes; TLS stays end to end
// between the pod and the API server.
func forward(in net.Conn, to string) {
	defer in.Close()
	out, err := net.DialTimeout("tcp", to, 5*time.Second)
	if err != nil {
		return
	}
	defer out.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	go pipe(out, in)
	go pipe(in, out)
	wg.Wait()
}
