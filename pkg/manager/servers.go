package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// disabledAddr turns an endpoint off, as in controller-runtime.
const disabledAddr = "0"

// httpServer is a listening endpoint: the metrics or the probes.
type httpServer struct {
	name string
	ln   net.Listener
	srv  *http.Server
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

// serve runs until ctx ends, then shuts down gracefully.
func (s *httpServer) serve(ctx context.Context) {
	if s == nil {
		return
	}
	logger := klog.FromContext(ctx)
	logger.Info("Serving", "endpoint", s.name, "address", s.ln.Addr().String())
	go func() {
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Server stopped", "endpoint", s.name)
		}
	}()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(shutdownCtx)
	}()
}

// close releases the listener of a server that will not serve.
func (s *httpServer) close() {
	if s != nil {
		_ = s.ln.Close()
	}
}
