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
	"flag"
	"fmt"
	"net/http"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ydzs.io/book-controller/examples/controller-runtime/internal/controller"
)

// tuning holds the levers controller-runtime v0.25 offers a careful user
// beyond what kubebuilder scaffolds. Every default keeps the scaffold's
// behaviour, which test/integration/parity checks; the bench's twin-tuned
// configuration sets each to match book-controller.
type tuning struct {
	stripManagedFields bool
	configMapsByLabel  bool
	statusMergePatch   bool
	readYourWrites     bool
	readyzCacheSync    bool
	cacheOwnConnection bool
	generationChanged  bool
	usePriorityQueue   bool
	eventQPS           float64
	eventBurst         int
	kubeAPIQPS         float64
	kubeAPIBurst       int
}

func (t *tuning) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&t.stripManagedFields, "cache-strip-managed-fields", false,
		"Drop managedFields from every object before it enters the cache (cache.TransformStripManagedFields).")
	fs.BoolVar(&t.configMapsByLabel, "cache-configmaps-by-label", false,
		"Cache only ConfigMaps labelled "+controller.ManagedByLabel+"="+controller.ManagedByValue+
			" (cache.Options.ByObject); a ConfigMap the cache lacks but the API server has is then read from the API server.")
	fs.BoolVar(&t.statusMergePatch, "status-merge-patch", false,
		"Write the status with a JSON merge patch (no resourceVersion, so no 409 Conflict from a stale cache) instead of Status().Update.")
	fs.BoolVar(&t.readYourWrites, "read-your-writes", false,
		"Make reads from the cache wait until it has observed this process's own earlier writes to the object "+
			"(client.CacheOptions.EnableReadYourWritesConsistency, experimental in controller-runtime v0.25).")
	fs.BoolVar(&t.readyzCacheSync, "readyz-cache-sync", false,
		"Make /readyz fail until the Book and ConfigMap caches have synced (the scaffold's readyz is a plain ping).")
	fs.BoolVar(&t.cacheOwnConnection, "cache-own-connection", false,
		"Give the cache's lists and watches a connection to the API server of their own (cache.Options.HTTPClient), "+
			"so that watch events do not wait behind the writes on the client's connection.")
	fs.BoolVar(&t.generationChanged, "generation-changed-predicate", false,
		"Reconcile a Book on update only when its metadata.generation changed (predicate.GenerationChangedPredicate), "+
			"so that the echo of the status the controller writes queues nothing.")
	fs.BoolVar(&t.usePriorityQueue, "use-priority-queue", true,
		"Use controller-runtime's priority queue (its default since v0.23); false uses the client-go rate-limiting queue.")
	fs.Float64Var(&t.eventQPS, "event-qps", 0,
		"Events per second sent to the API server; Events over the rate are dropped. 0: every Event is sent (the scaffold).")
	fs.IntVar(&t.eventBurst, "event-burst", 25,
		"Events that may be sent in a burst above --event-qps.")
	fs.Float64Var(&t.kubeAPIQPS, "kube-api-qps", 0,
		"Client-side limit on requests per second to the API server; 0 keeps ctrl.GetConfig's default (no limit), -1 means no limit.")
	fs.IntVar(&t.kubeAPIBurst, "kube-api-burst", 0,
		"Requests that may be sent in a burst above --kube-api-qps.")
}

func (t *tuning) validate() error {
	if t.eventQPS < 0 {
		return fmt.Errorf("--event-qps must be 0 (no limit) or positive, got %g", t.eventQPS)
	}
	if t.eventBurst < 1 {
		return fmt.Errorf("--event-burst must be at least 1, got %d", t.eventBurst)
	}
	if t.kubeAPIQPS > 0 && t.kubeAPIBurst < 1 {
		return fmt.Errorf("--kube-api-burst must be at least 1 with --kube-api-qps %g", t.kubeAPIQPS)
	}
	return nil
}

// applyToCache sets the cache options of the levers that shape the cache.
// cfg is the manager's config, for the cache's own connection.
func (t *tuning) applyToCache(o *cache.Options, cfg *rest.Config) error {
	if t.cacheOwnConnection {
		// Without it the manager hands the cache its own HTTP client, so
		// watches and writes share one HTTP/2 connection. client-go reuses
		// a transport for equal configs unless a Proxy function makes them
		// incomparable; this one connects directly, as the shared one does.
		own := rest.CopyConfig(cfg)
		own.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
		hc, err := rest.HTTPClientFor(own)
		if err != nil {
			return fmt.Errorf("building the cache's HTTP client: %w", err)
		}
		o.HTTPClient = hc
	}
	if t.stripManagedFields {
		o.DefaultTransform = cache.TransformStripManagedFields()
	}
	if t.configMapsByLabel {
		o.ByObject = map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{controller.ManagedByLabel: controller.ManagedByValue})},
		}
	}
	return nil
}

// applyToClient turns on read-your-writes for the manager's client: a
// reconcile started by the watch event of one of our own writes then reads
// the object as written, not the older copy the cache may still hold, which
// is what book-controller's own-write tracker (pkg/controller ownWrites) achieves.
func (t *tuning) applyToClient(o *client.Options) {
	if t.readYourWrites {
		on := true
		o.Cache = &client.CacheOptions{EnableReadYourWritesConsistency: &on}
	}
}

// applyToConfig sets the client-side rate limit when one was asked for.
func (t *tuning) applyToConfig(c *rest.Config) {
	if t.kubeAPIQPS != 0 {
		c.QPS = float32(t.kubeAPIQPS)
		c.Burst = t.kubeAPIBurst
	}
}
