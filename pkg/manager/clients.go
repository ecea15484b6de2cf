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
	"fmt"
	"net"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"

	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	"ydzs.io/book-controller/pkg/leader"
	"ydzs.io/book-controller/pkg/watchdecode" // fork:line watchdecode
)

// clients are one manager's connections to the API server but those that
// write on the controller's behalf (writers), which belong to the
// controller's stack: the process's, or each shard's.
type clients struct {
	// base is the configuration every client starts from, with our user
	// agent.
	base *rest.Config
	// kubeReads and bookReads list and watch for the informers, ask for
	// discovery and make the preflight's lists. They are never cut by the
	// fence, so that losing leadership does not turn into a storm of
	// re-lists. They write nothing the controller owns, but kubeReads does
	// send POSTs: the TokenReviews and SubjectAccessReviews of secure
	// metrics, unfenced so that a standby's metrics can be scraped too.
	kubeReads kubernetes.Interface
	bookReads versioned.Interface
	// leases holds the leader-election Leases, and makes the preflight's
	// dry-run create of one. It is never fenced: it must acquire, renew
	// and release.
	leases coordinationv1client.CoordinationV1Interface
	// others dials the connections of every client above but the writing
	// ones (whose connections are their own, see writers); Run closes them
	// when it returns.
	others *connrotation.Dialer
}

// newClients builds the clients that read, and the Lease client, from cfg,
// with the user agent ua.
// The Book informer's client decodes with pkg/watchdecode unless off.WatchDecode. // fork:line watchdecode
func newClients(cfg *rest.Config, ua string, off controller.Layers) (*clients, error) {
	base := rest.CopyConfig(cfg)
	base.UserAgent = ua
	c := &clients{base: base, others: trackedDialer(base.Dial)}
	reading := rest.CopyConfig(base)
	reading.Dial = c.others.DialContext
	var err error
	if c.kubeReads, err = kubernetes.NewForConfig(coreTypesConfig(reading)); err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	newBookClient := func(cfg *rest.Config) (versioned.Interface, error) { return versioned.NewForConfig(cfg) }
	// fork:begin watchdecode
	// An optimization layer: the client that fills the Book cache decodes
	// its watch stream in one pass per Book (pkg/watchdecode).
	if !off.WatchDecode {
		newBookClient = watchdecode.NewClientset
	}
	// fork:end watchdecode
	if c.bookReads, err = newBookClient(reading); err != nil {
		return nil, fmt.Errorf("creating Book client: %w", err)
	}
	if c.leases, err = coordinationv1client.NewForConfig(coreTypesConfig(reading)); err != nil {
		return nil, fmt.Errorf("creating Lease client: %w", err)
	}
	return c, nil
}

// writers are the clients that write (ConfigMaps and Events, Books), on
// connections of their own.
type writers struct {
	kube  kubernetes.Interface
	books versioned.Interface
	// config is the configuration they are built from, for other writing
	// clients on the same connections, behind the same fence.
	config *rest.Config
	// conns dials their connections: a fence closes them all on a loss,
	// and their owner when it stops.
	conns *connrotation.Dialer
}

// newWriters builds writing clients from base (whose user agent they keep),
// behind fence if it is not nil. Without shards the process has one set;
// with shards, each shard held gets its own, behind its own fence.
func newWriters(base *rest.Config, fence *leader.Fence) (*writers, error) {
	w := &writers{conns: trackedDialer(base.Dial)}
	writing := rest.CopyConfig(base)
	writing.Dial = w.conns.DialContext
	if fence != nil {
		writing = fence.Wrap(writing, w.conns)
	}
	w.config = writing
	var err error
	if w.kube, err = kubernetes.NewForConfig(coreTypesConfig(writing)); err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	if w.books, err = versioned.NewForConfig(writing); err != nil {
		return nil, fmt.Errorf("creating Book client: %w", err)
	}
	return w, nil
}

// close closes every connection the reading clients opened.
func (c *clients) close() { c.others.CloseAll() }

// trackedDialer dials with dial (client-go's default dialer if nil) and
// tracks the connections. A closed connection is reset rather than flushed:
// bytes a partition held back in the socket's send buffer are dropped
// instead of reaching the server when the partition heals.
func trackedDialer(dial func(ctx context.Context, network, address string) (net.Conn, error)) *connrotation.Dialer {
	if dial == nil {
		// What client-go uses when given no dialer.
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return connrotation.NewDialer(func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		return conn, err
	})
}

// coreTypesConfig returns a copy of cfg that talks protobuf, which built-in
// types support and which is cheaper to encode and decode than JSON. Custom
// resources only speak JSON, so the Book client keeps the original.
func coreTypesConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

// userAgent is the configured user agent (or DefaultUserAgent) followed by
// the replica's identity, so that the API server's audit log names which
// replica wrote.
func userAgent(configured, identity string) string {
	if configured == "" {
		configured = DefaultUserAgent
	}
	return fmt.Sprintf("%s (%s)", configured, identity)
}
