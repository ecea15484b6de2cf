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
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/metrics"
)

// notReadyBooks is a layer (Options.Off.NotReadyGauge turns it off) that
// buys an alert rather than speed: it knows since when each Book that is
// not Ready has been so, for the alert on Books that stay not Ready
// (book_controller_not_ready_since_timestamp_seconds,
// manifests/components/prometheus; its promtool tests: make test-alerts).
// It reads every Book event (handlers.go), so what counts is the Book's
// status as the API server holds it, whatever the reason and however the
// sync ended. A Book's time is its Ready=False condition's
// lastTransitionTime, or its creation if it has no Ready condition yet, so
// the figure survives restarts and failovers: the informer's initial list
// brings every Book again.
//
// One process can run several controllers (one per shard held), each with
// its own tracker; the gauges are over the trackers of the controllers
// running (running, below), so a shard given up takes its Books with it.
//
// Cost: an entry (about 100 B) per Book that is not Ready, none for Ready
// ones; a lock and a map lookup per Book event. Recomputing the oldest time is
// O(not Ready Books), and only happens when the oldest one leaves.
type notReadyBooks struct {
	mu     sync.Mutex // guards since and oldest; held by workers for one map operation
	since  map[cache.ObjectName]time.Time
	oldest time.Time // the earliest of since; zero when since is empty

	// count and oldestUnix are len(since) and oldest for the export, which
	// reads them without mu.
	count, oldestUnix atomic.Int64
}

// running are the trackers of the controllers running in this process.
var running struct {
	mu       sync.Mutex // guards trackers and the gauges' values
	trackers map[*notReadyBooks]struct{}
}

func newNotReadyBooks() *notReadyBooks {
	return &notReadyBooks{since: map[cache.ObjectName]time.Time{}}
}

// start adds the tracker to the gauges, stop takes it out (Run).
func (n *notReadyBooks) start() {
	running.mu.Lock()
	if running.trackers == nil {
		running.trackers = map[*notReadyBooks]struct{}{}
	}
	running.trackers[n] = struct{}{}
	running.mu.Unlock()
	export()
}

func (n *notReadyBooks) stop() {
	running.mu.Lock()
	delete(running.trackers, n)
	running.mu.Unlock()
	export()
}

// bookChanged records the readiness of a Book from its status, or forgets
// a Book deleted or being deleted.
func (n *notReadyBooks) bookChanged(obj any, deleted bool) {
	book, ok := obj.(*webappv2.Book)
	if !ok {
		return
	}
	key := cache.MetaObjectToName(book)
	ready := meta.FindStatusCondition(book.Status.Conditions, ConditionReady)
	switch {
	case deleted || book.DeletionTimestamp != nil:
		n.forget(key)
	case ready != nil && ready.Status == metav1.ConditionTrue:
		n.forget(key)
	case ready != nil:
		n.set(key, ready.LastTransitionTime.Time)
	default:
		n.set(key, book.CreationTimestamp.Time)
	}
}

func (n *notReadyBooks) set(key cache.ObjectName, since time.Time) {
	n.mu.Lock()
	old, had := n.since[key]
	if had && old.Equal(since) {
		n.mu.Unlock()
		return
	}
	n.since[key] = since
	if had && old.Equal(n.oldest) {
		n.recompute()
	} else if n.oldest.IsZero() || since.Before(n.oldest) {
		n.oldest = since
	}
	n.publish()
	n.mu.Unlock()
	export()
}

// forget drops a Book that is Ready or gone.
func (n *notReadyBooks) forget(key cache.ObjectName) {
	n.mu.Lock()
	old, had := n.since[key]
	if !had {
		n.mu.Unlock()
		return
	}
	delete(n.since, key)
	if old.Equal(n.oldest) {
		n.recompute()
	}
	n.publish()
	n.mu.Unlock()
	export()
}

func (n *notReadyBooks) recompute() {
	n.oldest = time.Time{}
	for _, t := range n.since {
		if n.oldest.IsZero() || t.Before(n.oldest) {
			n.oldest = t
		}
	}
}

// publish copies the summary for export; mu is held.
func (n *notReadyBooks) publish() {
	n.count.Store(int64(len(n.since)))
	if n.oldest.IsZero() {
		n.oldestUnix.Store(0)
	} else {
		n.oldestUnix.Store(n.oldest.Unix())
	}
}

// export sets the gauges from the running trackers. It runs under
// running.mu, so the last export reads the latest summaries.
func export() {
	running.mu.Lock()
	defer running.mu.Unlock()
	var count, oldest int64
	for n := range running.trackers {
		count += n.count.Load()
		if t := n.oldestUnix.Load(); t != 0 && (oldest == 0 || t < oldest) {
			oldest = t
		}
	}
	metrics.BooksNotReady.Set(float64(count))
	metrics.NotReadySince.Set(float64(oldest))
}
