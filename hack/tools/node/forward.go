/*
Copyright The book-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// routes is a repeatable flag of LISTEN=TO pairs.
type routes [][2]string

func (r *routes) String() string { return fmt.Sprint(*r) }

func (r *routes) Set(v string) error {
	listen, to, ok := strings.Cut(v, "=")
	if !ok || listen == "" || to == "" {
		return fmt.Errorf("%q is not LISTEN=TO (host:port=host:port)", v)
	}
	if host, _, err := net.SplitHostPort(to); err != nil || !net.ParseIP(host).IsLoopback() {
		return fmt.Errorf("%q: the target must be a loopback host:port", v)
	}
	*r = append(*r, [2]string{listen, to})
	return nil
}

// runForward joins the host's loopback and the node's network namespace
// without a veth between them: a socket belongs to the namespace of the
// thread that created it, so a listener made on a thread that has entered
// the node's namespace accepts there, and a dial made on such a thread
// connects there. Every byte stays on this machine; TLS stays end to end.
func runForward(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("node-helper forward", flag.ContinueOnError)
	netnsPath := fs.String("netns", "", "the node's network namespace, a file such as /run/netns/lcnode (required)")
	var in, out routes
	fs.Var(&in, "in", "LISTEN=TO: listen inside the node's namespace, forward to TO on the host's loopback (repeatable)")
	fs.Var(&out, "out", "LISTEN=TO: listen on the host's loopback, forward to TO inside the node's namespace (repeatable)")
	connect := fs.String("connect", "", "a Unix socket on the host on which to answer HTTP CONNECT requests by dialling the target inside the node's namespace (the API server's egress proxy)")
	var allow prefixes
	fs.Var(&allow, "connect-allow", "CIDRs, comma-separated: the only targets -connect dials (required with -connect)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *netnsPath == "" || len(in)+len(out) == 0 && *connect == "" {
		return errors.New("forward: -netns and at least one -in, -out or -connect are required")
	}
	if *connect != "" && len(allow) == 0 {
		return errors.New("forward: -connect needs -connect-allow, the networks it may dial (10.244.0.0/24,127.0.0.1/32)")
	}
	ns, err := os.Open(*netnsPath)
	if err != nil {
		return fmt.Errorf("forward: opening the node's network namespace: %w", err)
	}
	defer ns.Close()
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	serve := func(l net.Listener, to string, dial func() (net.Conn, error)) {
		listeners = append(listeners, l)
		fmt.Printf("forward %s -> %s\n", l.Addr(), to)
		go acceptLoop(l, to, dial)
	}
	dialHost := func(to string) (net.Conn, error) { return net.DialTimeout("tcp", to, 5*time.Second) }
	dialInside := func(to string) (conn net.Conn, err error) {
		err = inNetns(ns, func() error { conn, err = dialHost(to); return err })
		return conn, err
	}
	for _, r := range in {
		var l net.Listener
		if err := inNetns(ns, func() (err error) { l, err = net.Listen("tcp", r[0]); return err }); err != nil {
			return fmt.Errorf("forward: listening on %s in the node's namespace: %w", r[0], err)
		}
		serve(l, "host "+r[1], func() (net.Conn, error) { return dialHost(r[1]) })
	}
	for _, r := range out {
		if host, _, err := net.SplitHostPort(r[0]); err != nil || !net.ParseIP(host).IsLoopback() {
			return fmt.Errorf("forward: -out %s=%s: the host side must listen on loopback", r[0], r[1])
		}
		l, err := net.Listen("tcp", r[0])
		if err != nil {
			return fmt.Errorf("forward: %w", err)
		}
		serve(l, "node "+r[1], func() (net.Conn, error) { return dialInside(r[1]) })
	}
	if *connect != "" {
		l, err := listenUnix(*connect)
		if err != nil {
			return fmt.Errorf("forward: -connect: %w", err)
		}
		listeners = append(listeners, l)
		fmt.Printf("forward CONNECT on %s -> node %v\n", *connect, allow)
		go (&connectProxy{allow: allow, dial: dialInside}).serve(l)
	}
	<-ctx.Done()
	return nil
}

// inNetns runs f on an OS thread that has entered the network namespace ns,
// in a goroutine of its own: if the thread cannot go back to this process's
// namespace it stays locked, and the runtime ends it with the goroutine, so
// no other goroutine ever runs in the wrong namespace.
func inNetns(ns *os.File, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", syscall.Gettid()))
		if err != nil {
			errc <- err
			return
		}
		defer self.Close()
		if err := setns(ns); err != nil {
			errc <- err
			return
		}
		ferr := f()
		if err := setns(self); err != nil {
			errc <- errors.Join(ferr, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

func setns(ns *os.File) error {
	if _, _, errno := unix.RawSyscall(unix.SYS_SETNS, ns.Fd(), unix.CLONE_NEWNET, 0); errno != 0 {
		return fmt.Errorf("setns %s: %w", ns.Name(), errno)
	}
	return nil
}

func acceptLoop(l net.Listener, to string, dial func() (net.Conn, error)) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go forward(c, to, dial)
	}
}

// forward copies both ways until either side closes.
func forward(in net.Conn, to string, dial func() (net.Conn, error)) {
	defer in.Close()
	out, err := dial()
	if err != nil {
		fmt.Fprintf(os.Stderr, "forward: %s -> %s: %v\n", in.LocalAddr(), to, err)
		return
	}
	defer out.Close()
	splice(in, out)
}

// splice copies both ways between a and b until either side closes,
// passing each half-close on.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if hc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = hc.CloseWrite()
		}
	}
	go pipe(b, a)
	go pipe(a, b)
	wg.Wait()
}
