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

package framework

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Proxy is a TCP proxy on 127.0.0.1 between one client (a controller
// replica) and the API server, whose behaviour a test switches at any
// moment: the network faults a replica can meet, below TLS and HTTP, so the
// client sees what it would see on a real network.
//
//   - Pass forwards bytes both ways.
//   - BlackHole is a partition: connections are accepted, what the client
//     sends is read and discarded, nothing is answered, and nothing is
//     closed, so the client learns of it only from its own timeouts. Bytes
//     already on their way are dropped too.
//   - Latency(d) holds every chunk the client sends for d before passing
//     it on, so each request takes effect d later than it was sent and is
//     answered at least d later: a slow API server, as the client sees it.
//
// Switching back to Pass heals: connections made before the partition carry
// on (their TLS streams, having lost bytes, then fail and are redialled by
// the client); connections made during it stay black-holed until the client
// gives up on them.
type Proxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	mode    proxyMode
	latency time.Duration
	changed chan struct{} // closed and replaced at every mode change
	conns   map[net.Conn]struct{}
	closed  bool

	wg sync.WaitGroup
}

type proxyMode int

const (
	proxyPass proxyMode = iota
	proxyBlackHole
	proxyLatency
)

// StartProxy listens on a free port of 127.0.0.1 (the API server's serving
// certificate is for 127.0.0.1) and forwards to target (host:port) until
// the end of the test.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: target, ln: ln, changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.Close)
	return p
}

// StartAPIServerProxy starts a Proxy in front of the cluster's API server
// and writes a copy of the admin kubeconfig that goes through it into dir.
func (e *Env) StartAPIServerProxy(t testing.TB, dir, name string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(e.Cluster.RESTConfig().Host)
	if err != nil {
		t.Fatal(err)
	}
	p := StartProxy(t, u.Host)
	return p, e.ProxiedKubeconfig(t, dir, name, p)
}

// ProxiedKubeconfig writes into dir a copy of the admin kubeconfig whose
// server is p.
func (e *Env) ProxiedKubeconfig(t testing.TB, dir, name string, p *Proxy) string {
	t.Helper()
	return e.EditedKubeconfig(t, dir, name, func(cfg *clientcmdapi.Config) {
		for _, c := range cfg.Clusters {
			c.Server = "https://" + p.Addr()
		}
	})
}

// Addr is where the proxy listens (127.0.0.1:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Pass forwards everything from now on: the end of a partition or of the
// latency.
func (p *Proxy) Pass() { p.set(proxyPass, 0) }

// BlackHole starts a partition.
func (p *Proxy) BlackHole() { p.set(proxyBlackHole, 0) }

// Latency delays each chunk the client sends by d.
func (p *Proxy) Latency(d time.Duration) { p.set(proxyLatency, d) }

func (p *Proxy) set(m proxyMode, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.latency = m, d
	close(p.changed)
	p.changed = make(chan struct{})
}

// state returns the mode, the latency and a channel closed at the next
// change.
func (p *Proxy) state() (proxyMode, time.Duration, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.latency, p.changed
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.changed) // wakes whatever waits for a change
	p.changed = make(chan struct{})
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// track registers conns to be closed by Close; false if already closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(client) {
			client.Close()
			return
		}
		p.wg.Go(func() { p.serve(client) })
	}
}

// serve proxies one client connection until either side ends it (outside a
// partition) or the proxy closes.
func (p *Proxy) serve(client net.Conn) {
	if mode, _, _ := p.state(); mode == proxyBlackHole {
		// Accepted, never connected on: read and discard until the client
		// gives up.
		_, _ = io.Copy(io.Discard, client)
		p.untrack(client)
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil || !p.track(server) {
		if server != nil {
			server.Close()
		}
		p.untrack(client)
		return
	}
	var pumps sync.WaitGroup
	pumps.Go(func() { p.pump(client, server, true) })
	pumps.Go(func() { p.pump(server, client, false) })
	pumps.Wait()
	p.untrack(client, server)
}

// pump copies src to dst chunk by chunk, as the mode says when each chunk
// is read and when it is due. upstream is the client-to-server direction,
// the one Latency delays. When src ends, pump ends the connection, except
// during a partition: then it waits for the heal (or Close), so that the
// client sees no close.
func (p *Proxy) pump(src, dst net.Conn, upstream bool) {
	type chunk struct {
		data []byte
		due  time.Time
	}
	queue := make(chan chunk, 4096)
	var writer sync.WaitGroup
	writer.Go(func() {
		for c := range queue {
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			if mode, _, _ := p.state(); mode == proxyBlackHole {
				continue // the partition drops what was on its way
			}
			if _, err := dst.Write(c.data); err != nil {
				// Unblock the reader: the connection is over.
				src.Close()
				for range queue {
				}
				return
			}
		}
	})
	buf := make([]byte, 32*1024)
	var readErr error
	for {
		n, err := src.Read(buf)
		if n > 0 {
			mode, latency, _ := p.state()
			switch {
			case mode == proxyBlackHole:
				// read and discarded
			case mode == proxyLatency && upstream:
				queue <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(latency)}
			default:
				queue <- chunk{data: append([]byte(nil), buf[:n]...)}
			}
		}
		if err != nil {
			readErr = err
			break
		}
	}
	close(queue)
	writer.Wait()
	for {
		mode, _, changed := p.state()
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if mode != proxyBlackHole || closed || errors.Is(readErr, net.ErrClosed) {
			break
		}
		<-changed
	}
	src.Close()
	dst.Close()
}

// String describes the proxy for test logs.
func (p *Proxy) String() string {
	mode, latency, _ := p.state()
	switch mode {
	case proxyBlackHole:
		return fmt.Sprintf("proxy %s→%s (black hole)", p.Addr(), p.target)
	case proxyLatency:
		return fmt.Sprintf("proxy %s→%s (latency %v)", p.Addr(), p.target, latency)
	}
	return fmt.Sprintf("proxy %s→%s (pass)", p.Addr(), p.target)
}
