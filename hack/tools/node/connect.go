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
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"
)

// prefixes is a flag of comma-separated CIDRs.
type prefixes []netip.Prefix

func (p *prefixes) String() string { return fmt.Sprint(*p) }

func (p *prefixes) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		pfx, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not a CIDR such as 10.244.0.0/24: %w", s, err)
		}
		*p = append(*p, pfx.Masked())
	}
	return nil
}

// connectProxy is the API server's way into the node's network: its
// egress selector (kube-apiserver --egress-selector-config-file) sends
// traffic of the "cluster" network, such as a webhook behind a Service or
// the kubelet, as HTTP CONNECT requests over a Unix socket on the host,
// which this proxy answers by dialling the target inside the node's
// namespace. Only targets in allow are dialled, so the API server reaches
// the pods and the node's loopback and nothing else.
type connectProxy struct {
	allow prefixes
	dial  func(addr string) (net.Conn, error)
}

// listenUnix listens on a Unix socket at path, replacing a socket that a
// killed proxy left behind, and lets only its owner connect.
func listenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing the old socket %s: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("making %s private: %w", path, err)
	}
	return l, nil
}

func (p *connectProxy) serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

// handle answers one CONNECT: a refusal with a status and a reason, or 200
// and then the bytes both ways until either side closes.
func (p *connectProxy) handle(c net.Conn) {
	defer c.Close()
	// A client that never finishes its request must not hold a goroutine.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	addr := req.RequestURI
	if req.Method != http.MethodConnect {
		refuse(c, http.StatusMethodNotAllowed, "only CONNECT is proxied")
		return
	}
	if err := p.allowed(addr); err != nil {
		refuse(c, http.StatusForbidden, err.Error())
		return
	}
	out, err := p.dial(addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "connect: %s: %v\n", addr, err)
		refuse(c, http.StatusBadGateway, err.Error())
		return
	}
	defer out.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// Whatever the client sent after its request belongs to the target.
	if n := br.Buffered(); n > 0 {
		buffered, _ := br.Peek(n)
		if _, err := out.Write(buffered); err != nil {
			return
		}
	}
	splice(c, out)
}

// allowed says why addr, a CONNECT request's host:port, is not dialled, if
// it is not: only IP addresses within allow are.
func (p *connectProxy) allowed(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%q is not an IP address: this proxy resolves no names", host)
	}
	for _, pfx := range p.allow {
		if pfx.Contains(ip.Unmap()) {
			return nil
		}
	}
	return fmt.Errorf("%s is outside the node's networks %v", ip, p.allow)
}

func refuse(c net.Conn, code int, reason string) {
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		code, http.StatusText(code), len(reason), reason)
}
