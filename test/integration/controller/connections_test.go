package controller_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"ydzs.io/book-controller/test/integration/framework"
)

// TestABacklogOpensOneConnectionPerClient: workers meeting a backlog all
// write at once. Each client must still open one connection to the API
// server, not one per worker: every TLS handshake costs the server CPU, and
// Go's HTTP/2 transport keeps only one of the connections it dials for
// requests that found none open. The workers and the Events in flight stay
// below kube-apiserver's default limit of 100 streams per connection, over
// which the transport dials more whatever the controller does.
func TestABacklogOpensOneConnectionPerClient(t *testing.T) {
	t.Parallel()
	const n, workers = 256, 64
	ns := env.Namespace(t)
	env.CreateBooks(t, ns, "book", n)

	cfg := env.ControllerServiceAccountConfig(t)
	var dials atomic.Int32
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		dials.Add(1)
		return dialer.DialContext(ctx, network, address)
	}
	env.StartController(t, framework.ControllerOptions{Namespace: ns, Workers: workers, RESTConfig: cfg,
		EventQPS: 1, EventBurst: 1})
	env.WaitForBooksReady(t, ns, n)

	// The clients that dial without leader election or metrics: the
	// informers' two (ConfigMaps, Books) and the workers' two (ConfigMaps
	// and Events, Books). One more is allowed for a connection the server
	// closed and that was dialled again.
	if got, limit := dials.Load(), int32(5); got > limit {
		t.Errorf("the controller dialled the API server %d times for a %d-Book backlog with %d workers; want at most %d (one connection per client)", got, n, workers, limit)
	}
}
