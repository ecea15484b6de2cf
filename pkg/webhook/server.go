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

package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// Timeouts bound what a slow or stuck client can hold: the API server sends
// a review in one write and gives up after its own timeout (30s at most).
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// DefaultTimeouts are the server's timeouts.
var DefaultTimeouts = Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 30 * time.Second, Idle: 90 * time.Second}

// Server serves the handler over TLS on a listener of its own, with the
// certificate getCert returns for each handshake, so a rotated certificate
// is served without a restart.
type Server struct {
	ln      net.Listener
	srv     *http.Server
	serving atomic.Bool
	done    sync.WaitGroup
}

// Listen binds addr now, so that a port in use fails the start.
func Listen(addr string, h http.Handler, getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error), t Timeouts) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    64 << 10,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: getCert,
			// HTTP/1.1 only: the API server's webhook client uses it, and it
			// leaves out HTTP/2's stream-reset CVEs (CVE-2023-44487).
			NextProtos: []string{"http/1.1"},
		},
		ErrorLog: nil,
	}
	return &Server{ln: ln, srv: srv}, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve serves until Stop.
func (s *Server) Serve(ctx context.Context) {
	logger := klog.FromContext(ctx)
	s.serving.Store(true)
	s.done.Go(func() {
		defer s.serving.Store(false)
		if err := s.srv.Serve(tls.NewListener(s.ln, s.srv.TLSConfig)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Server stopped", "endpoint", "--webhook-bind-address")
		}
	})
}

// Ready is nil when the server is serving and its certificate can be had.
func (s *Server) Ready() error {
	if !s.serving.Load() {
		return errors.New("conversion webhook not serving")
	}
	if _, err := s.srv.TLSConfig.GetCertificate(&tls.ClientHelloInfo{}); err != nil {
		return fmt.Errorf("conversion webhook has no certificate: %w", err)
	}
	return nil
}

// Stop shuts the server down, waiting a little for the reviews it is
// answering.
func (s *Server) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	_ = s.ln.Close()
	s.done.Wait()
}

// Close closes the listener of a server that never served.
func (s *Server) Close() error { return s.ln.Close() }
