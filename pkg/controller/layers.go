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
	"fmt"
	"strings"

	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	bookinformers "ydzs.io/book-controller/pkg/generated/informers/externalversions/webapp/v2"
)

// This file is where the classic loop meets its optimization layers. Each
// layer is one named type in a file of its own, reached from the loop
// through one of the small interfaces below; each interface has a classic
// implementation here that makes the loop behave as if the layer were
// absent, which is what Options.Off chooses. With every layer off, the loop
// is sample-controller's: Books and ConfigMaps cached whole, keys in arrival
// order, every watch event a sync, nothing cached about our own writes.
//
//	layer                 its type (file)                   the loop calls
//	own writes            ownWrites (ownwrites.go)          sync: cacheBehind; handlers: isEcho; writes: wrap
//	ConfigMap projection  configMapProjection (projection)  sync: get
//	compact Book cache    bookCompactor (bookcache.go)      the Book informer's transform (watch)
//	live-first order      liveFirst (livefirst.go)          handlers: mark; the queue's storage (New)
//	connection warm-up    connectionWarmUp (connections.go) Run: open
//	not-Ready gauge       notReadyBooks (notready.go)       handlers: bookChanged; Run: start
//	watch decoding        pkg/watchdecode                   (pkg/manager: the Book informer's client) // fork:line watchdecode
//
// Others are switched by their own settings, not by Off:
// the live view's Observer (observer.go; nil unless --ui-bind-address), // fork:line ui
// shards (pkg/shard; --shards). // fork:line shards

// Layers names the optimization layers to turn off; the zero value leaves
// every one on, as the book-controller command runs by default.
type Layers struct {
	// OwnWrites: sync on every watch event, even the echo of our own
	// write, and on caches older than our last write (which then costs a
	// 409 or an AlreadyExists and a GET).
	OwnWrites bool
	// ConfigMapProjection: cache whole ConfigMaps (less managedFields,
	// as any informer of ours) instead of the fields the sync reads.
	ConfigMapProjection bool
	// CompactBooks: cache Books as decoded.
	CompactBooks bool
	// LiveFirst: hand out keys in arrival order, client-go's FIFO.
	LiveFirst bool
	// ConnectionWarmUp: let the workers' first requests dial.
	ConnectionWarmUp bool
	// NotReadyGauge: no book_controller_books_not_ready or
	// book_controller_not_ready_since_timestamp_seconds, so no alert on
	// Books that stay not Ready.
	NotReadyGauge bool
	// fork:begin watchdecode
	// WatchDecode: decode the Book watch stream with client-go's decoder.
	// It is applied where the Book informer's client is built
	// (pkg/manager); the controller itself does not read it.
	WatchDecode bool
	// fork:end watchdecode
}

// layerNames are the names of Layers' fields on the command line
// (--disable-layers), in the order the table above gives them.
var layerNames = []struct {
	name string
	off  func(*Layers) *bool
}{
	{"own-writes", func(l *Layers) *bool { return &l.OwnWrites }},
	{"configmap-projection", func(l *Layers) *bool { return &l.ConfigMapProjection }},
	{"compact-books", func(l *Layers) *bool { return &l.CompactBooks }},
	{"live-first", func(l *Layers) *bool { return &l.LiveFirst }},
	{"connection-warm-up", func(l *Layers) *bool { return &l.ConnectionWarmUp }},
	{"not-ready-gauge", func(l *Layers) *bool { return &l.NotReadyGauge }},
	{"watch-decode", func(l *Layers) *bool { return &l.WatchDecode }}, // fork:line watchdecode
}

// AllLayers turns every layer off.
func AllLayers() Layers {
	var l Layers
	for _, n := range layerNames {
		*n.off(&l) = true
	}
	return l
}

// LayerNames lists the names ParseLayers accepts, "all" excepted.
func LayerNames() []string {
	names := make([]string, len(layerNames))
	for i, n := range layerNames {
		names[i] = n.name
	}
	return names
}

// ParseLayers turns names (those of LayerNames, or "all") into the Layers
// they switch off. An unknown name is an error that lists the known ones.
func ParseLayers(names []string) (Layers, error) {
	var l Layers
	for _, name := range names {
		name = strings.TrimSpace(name)
		if name == "all" {
			l = AllLayers()
			continue
		}
		found := false
		for _, n := range layerNames {
			if n.name == name {
				*n.off(&l), found = true, true
			}
		}
		if !found {
			return Layers{}, fmt.Errorf("unknown layer %q: want %s or all", name, strings.Join(LayerNames(), ", "))
		}
	}
	return l, nil
}

// Names returns the names of the layers l turns off, in LayerNames' order.
func (l Layers) Names() []string {
	var names []string
	for _, n := range layerNames {
		if *n.off(&l) {
			names = append(names, n.name)
		}
	}
	return names
}

// useLayers puts each layer, or its classic stand-in, in its seam, as off
// says: the one place that chooses. It returns the work queue's storage,
// nil for client-go's FIFO.
func (c *Controller) useLayers(off Layers, books bookinformers.BookInformer, configMaps coreinformers.ConfigMapInformer) workqueue.Queue[cache.ObjectName] {
	c.ownWrites, c.order, c.connections, c.readiness = untracked{}, arrivalOrder{}, dialOnDemand{}, untrackedReadiness{}
	c.configMaps = configMapLister{lister: configMaps.Lister()}
	var storage workqueue.Queue[cache.ObjectName]
	if !off.OwnWrites {
		c.ownWrites = newOwnWrites(books.Informer().GetStore(), configMaps.Informer().GetStore(), c.release)
	}
	if !off.ConfigMapProjection {
		c.configMaps = newConfigMapProjection(configMaps.Informer().GetIndexer(), books.Lister())
	}
	if !off.CompactBooks {
		c.bookTransform = newBookCompactor().transform
	}
	if !off.LiveFirst {
		order := newLiveFirst()
		c.order, storage = order, order
	}
	if !off.ConnectionWarmUp {
		c.connections = connectionWarmUp{clients: []namedClient{
			{"kubernetes", c.kubeClient.Discovery().RESTClient()},
			{"books", c.bookClient.Discovery().RESTClient()},
		}}
	}
	if !off.NotReadyGauge {
		c.readiness = newNotReadyBooks()
	}
	return storage
}

// writeTracker is the seam of the own-writes layer (ownwrites.go): what the
// loop knows of its own writes until the informers bring them back.
type writeTracker interface {
	// cacheBehind returns a *staleCacheError when an informer's store has
	// yet to show one of our writes for key: the sync must wait for the
	// event that brings it. nil: read the caches.
	cacheBehind(key cache.ObjectName) error
	// isEcho tells whether an event of r at resourceVersion rv for key
	// needs no sync: it brings back our own write.
	isEcho(key cache.ObjectName, r resource, rv string) bool
	// wrap returns w with its writes recorded.
	wrap(w apiWriter) apiWriter
}

// untracked is the classic writeTracker: every event is work, every cache
// fresh enough, and the API server's conflict checks catch the rest.
type untracked struct{}

func (untracked) cacheBehind(cache.ObjectName) error             { return nil }
func (untracked) isEcho(cache.ObjectName, resource, string) bool { return false }
func (untracked) wrap(w apiWriter) apiWriter                     { return w }

// configMapStore is the seam of the ConfigMap projection
// (configmapprojection.go): how the sync reads the ConfigMap cache, and
// what the ConfigMap informer keeps of each object.
type configMapStore interface {
	// get returns the cached ConfigMap namespace/name, nil when the cache
	// holds none of that name.
	get(namespace, name string) (observedConfigMap, error)
	// transformFunc is the ConfigMap informer's transform; nil keeps
	// ConfigMaps as decoded.
	transformFunc() cache.TransformFunc
}

// queueOrder is the seam of the live-first order (livefirst.go): the
// handlers tell it, just before each Add, whether the key is a live change.
type queueOrder interface {
	// mark is called with the object an event brought (nil for a key
	// released by the own-writes layer), before its key's Add; it reports
	// whether the key waits behind the live ones.
	mark(key cache.ObjectName, obj any, initialList bool) (backfill bool)
}

// arrivalOrder is the classic queueOrder: client-go's FIFO.
type arrivalOrder struct{}

func (arrivalOrder) mark(cache.ObjectName, any, bool) bool { return false }

// connectionOpener is the seam of the connection warm-up (connections.go).
type connectionOpener interface {
	// open opens the writing clients' connections before the workers start.
	open(ctx context.Context)
}

// dialOnDemand is the classic connectionOpener: the first requests dial.
type dialOnDemand struct{}

func (dialOnDemand) open(context.Context) {}

// readinessTracker is the seam of the not-Ready gauge (notready.go).
type readinessTracker interface {
	// bookChanged is told every Book event: the Book as the API server
	// now holds it, or its deletion.
	bookChanged(book any, deleted bool)
	// start and stop put the tracker's Books into the gauges and take them
	// out: they count while the controller runs (Run).
	start()
	stop()
}

// untrackedReadiness is the classic readinessTracker: no gauge.
type untrackedReadiness struct{}

func (untrackedReadiness) bookChanged(any, bool) {}
func (untrackedReadiness) start()                {}
func (untrackedReadiness) stop()                 {}
