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

package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// disabledAddr turns an endpoint off, as in controller-runtime.
const disabledAddr = "0"

// shutdownGrace is how long a stopping endpoint waits for the requests it is
// answering.
const shutdownGrace = 5 * time.Second

// httpServer is a listening endpoint: metrics, probes, profiles or the
// live view.
type httpServer struct {
	name string
	ln   net.Listener
	srv  *http.Server
	done sync.WaitGroup // the serving goroutine
}

// listen binds addr now, so a port already in use fails the start-up with
// the flag's name instead of surfacing later in a log line. An empty or "0"
// address returns nil: the endpoint is off.
func listen(flag, addr string, h http.Handler) (*httpServer, error) {
	if addr == "" || addr == disabledAddr {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %v: choose another address, or %q to turn it off", flag, addr, err, disabledAddr)
	}
	return &httpServer{name: flag, ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// serve answers requests until stop.
func (s *httpServer) serve(ctx context.Context) {
	if s == nil {
		return
	}
	logger := klog.FromContext(ctx)
	logger.Info("Serving", "endpoint", s.name, "address", s.ln.Addr().String())
	s.done.Go(func() {
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Server stopped", "endpoint", s.name)
		}
	})
}

// stop shuts the server down gracefully (or closes the listener of one
// that never served) and returns once it has stopped.
func (s *httpServer) stop() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	_ = s.ln.Close() // for a server that never served; harmless otherwise
	s.done.Wait()
}
