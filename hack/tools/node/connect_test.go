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
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
)

// startProxy serves a connectProxy that allows only 127.0.0.0/8 and dials
// on the host, on a Unix socket in a temporary directory.
func startProxy(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "egress.sock")
	l, err := listenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := &connectProxy{
		allow: prefixes{netip.MustParsePrefix("127.0.0.0/8")},
		dial:  func(addr string) (net.Conn, error) { return net.Dial("tcp", addr) },
	}
	go p.serve(l)
	return sock
}

// ask sends one request line over the socket and returns the answer's
// status and body.
func ask(t *testing.T, sock, request string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the proxy's answer to %q: %v", request, err)
	}
	return res, c, br
}

func TestConnectReachesAnAllowedTarget(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		c, err := echo.Accept()
		if err == nil {
			_, _ = io.Copy(c, c)
			c.Close()
		}
	}()
	addr := echo.Addr().String()
	res, c, br := ask(t, startProxy(t), "CONNECT "+addr+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT %s: %s, want 200", addr, res.Status)
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	line, err := br.ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("through the tunnel: got %q, %v; want the echo of ping", line, err)
	}
}

func TestConnectRefusesWhatItMustNotDial(t *testing.T) {
	sock := startProxy(t)
	for _, tc := range []struct {
		name, request string
		code          int
		reason        string
	}{
		{"an address outside the allowed networks", "CONNECT 10.1.2.3:443 HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusForbidden, "outside the node's networks"},
		{"a name, which it does not resolve", "CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusForbidden, "not an IP address"},
		{"no port", "CONNECT 127.0.0.1 HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusForbidden, "not host:port"},
		{"another method", "GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusMethodNotAllowed, "only CONNECT"},
		{"a closed port", "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusBadGateway, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _, _ := ask(t, sock, tc.request)
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.code || !strings.Contains(string(body), tc.reason) {
				t.Fatalf("got %s %q, want %d and a reason containing %q", res.Status, body, tc.code, tc.reason)
			}
		})
	}
}

func TestConnectNeedsTheNetworksItMayDial(t *testing.T) {
	err := runForward(t.Context(), []string{"-netns", "/proc/self/ns/net", "-connect", filepath.Join(t.TempDir(), "s")})
	if err == nil || !strings.Contains(err.Error(), "-connect-allow") {
		t.Fatalf("runForward with -connect alone: %v, want an error naming -connect-allow", err)
	}
	var p prefixes
	if err := p.Set("10.244.0.0/24,nonsense"); err == nil || !strings.Contains(err.Error(), "not a CIDR") {
		t.Fatalf("-connect-allow nonsense: %v, want an error naming the bad CIDR", err)
	}
}
