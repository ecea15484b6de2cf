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

package controller_test

import (
	"context"
	"fmt"
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
// which the transport dials more whatever the controller does. This is the
// connection warm-up layer's work (pkg/controller/connections.go); the
// test also runs without it and logs what that dials, the layer's gain.
func TestABacklogOpensOneConnectionPerClient(t *testing.T) {
	t.Parallel()
	for _, warmUp := range []bool{true, false} {
		t.Run(fmt.Sprintf("warm-up=%v", warmUp), func(t *testing.T) {
			t.Parallel()
			dials := backlogDials(t, warmUp)
			t.Logf("the controller dialled the API server %d times for a %d-Book backlog with %d workers, connection warm-up %v",
				dials, backlogBooks, backlogWorkers, warmUp)
			// The clients that dial without leader election or metrics: the
			// informers' two (ConfigMaps, Books) and the workers' two
			// (ConfigMaps and Events, Books). One more is allowed for a
			// connection the server closed and that was dialled again.
			if limit := int32(5); warmUp && dials > limit {
				t.Errorf("dialled %d times; want at most %d (one connection per client)", dials, limit)
			}
		})
	}
}

const backlogBooks, backlogWorkers = 256, 64

// backlogDials runs a controller over a fresh backlog and returns how many
// connections it dialled by the time every Book was Ready.
func backlogDials(t *testing.T, warmUp bool) int32 {
	ns := env.Namespace(t)
	env.CreateBooks(t, ns, "book", backlogBooks)

	cfg := env.ControllerServiceAccountConfig(t)
	var dials atomic.Int32
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		dials.Add(1)
		return dialer.DialContext(ctx, network, address)
	}
	opts := framework.ControllerOptions{Namespace: ns, Workers: backlogWorkers, RESTConfig: cfg, EventQPS: 1, EventBurst: 1}
	if warmUp {
		opts.On.ConnectionWarmUp = true
	} else {
		opts.Off.ConnectionWarmUp = true
	}
	env.StartController(t, opts)
	env.WaitForBooksReady(t, ns, backlogBooks)
	return dials.Load()
}
