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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// Observer is told, step by step, what the controller does with each Book:
// the seam a live view reads the machinery through. Options.Observer
// is nil unless such a view is on; then every call below is skipped behind a
// nil check, so the hot path costs nothing more (BenchmarkHotPath).
//
// The calls come from the informers' handler goroutines (Event, Relist) and
// from the workers (the rest), concurrently: an Observer must be safe for
// concurrent use, and fast, for it runs inside the pipeline it watches.
// What client-go's own hooks already report (the work queue's depth, adds,
// retries and waits through workqueue.MetricsProvider, pkg/metrics) is not
// repeated here.
type Observer interface {
	// Event: an informer's event handler heard of an object and decided
	// what to do with it.
	Event(HandlerEvent)
	// Relist: an informer's watch ended with err, so its cache.Reflector
	// lists (or streams the list) again.
	Relist(informer Informer, err error)
	// WorkerBusy: worker took key from the queue and starts its sync.
	WorkerBusy(worker int, key cache.ObjectName)
	// CacheWait: key's sync found a cache behind our own write of resource
	// (written at resourceVersion written; the store is at read) and waits
	// for the watch event that brings it.
	CacheWait(key cache.ObjectName, resource string, written, read string)
	// Wrote: one of our API writes for a Book got its answer.
	Wrote(APIWrite)
	// Backoff: the rate limiter will hand key back after d (AddRateLimited).
	Backoff(key cache.ObjectName, d time.Duration)
	// Synced: worker is done with key; the worker is idle again.
	Synced(SyncOutcome)
}

// Informer names one of the controller's two informers.
type Informer string

// The controller's informers.
const (
	BooksInformer      Informer = "books"
	ConfigMapsInformer Informer = "configmaps"
)

// EventType is the kind of an informer notification.
type EventType string

// Informer notification types, as cache.ResourceEventHandler delivers them.
const (
	EventAdd    EventType = "add"
	EventUpdate EventType = "update"
	EventDelete EventType = "delete"
	// EventReleased is not an informer notification: an event held back
	// while our write was in flight, queued once the write's answer showed
	// it was not that write's echo (ownwrites.go).
	EventReleased EventType = "released"
)

// Decision is what an event handler did with an event.
type Decision string

// Event handler decisions.
const (
	// DecisionEnqueued: the Book's key was added to the work queue.
	DecisionEnqueued Decision = "enqueued"
	// DecisionEcho: the event brings back our own write (or arrived while
	// a write of its resource was in flight and waits for the answer):
	// nothing is queued.
	DecisionEcho Decision = "skipped-echo"
	// DecisionResync: an update with an unchanged resourceVersion, a
	// periodic resync or a relist replaying the cache: nothing is queued.
	DecisionResync Decision = "ignored-resync"
	// DecisionInvalid: not an object the handler understands; logged.
	DecisionInvalid Decision = "invalid"
)

// HandlerEvent is one informer notification and its handler's decision.
type HandlerEvent struct {
	Informer Informer
	Type     EventType
	// InitialList is set for the adds of an informer's first list.
	InitialList bool
	// Backfill is set when an enqueued key waits behind the live ones:
	// it came from an initial list with nothing new to answer, and the
	// live-first order is on (livefirst.go). An enqueued key without it is
	// a live change.
	Backfill        bool
	Key             cache.ObjectName
	ResourceVersion string
	Decision        Decision
}

// APIWrite is one of our writes and the API server's answer.
type APIWrite struct {
	Key cache.ObjectName
	// Resource is "configmaps" or "books.webapp.ydzs.io"; Verb is
	// "create", "update" or "update-status".
	Resource, Verb string
	// ResourceVersion is what the write left, "" when it failed.
	ResourceVersion string
	Err             error
	Duration        time.Duration
}

// SyncOutcome is a finished sync, labelled as ReconcileTotal's result.
type SyncOutcome struct {
	Worker int
	Key    cache.ObjectName
	// Result is one of pkg/metrics' Result* labels.
	Result       string
	Err          error
	RequeueAfter time.Duration
	Duration     time.Duration
	// Refusal is, when the API server refused the ConfigMap write for
	// good (refusal.go), the Ready reason the Book now shows, e.g.
	// ConfigMapQuotaExceeded; the key is retried with backoff, capped at
	// the conflict recheck.
	Refusal string
}

// Verbs of APIWrite.
const (
	verbCreate       = "create"
	verbUpdate       = "update"
	verbUpdateStatus = "update-status"
)

// observe reports a handler's decision, when there is an observer.
func (c *Controller) observe(ev HandlerEvent) {
	if c.observer != nil {
		c.observer.Event(ev)
	}
}

// observedWriter tells the observer each of our writes and its answer. New
// wraps the sync's writer with it only when there is an observer.
type observedWriter struct {
	apiWriter
	observer Observer
}

func (w observedWriter) createConfigMap(ctx context.Context, book *webappv2.Book, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	start := time.Now()
	created, err := w.apiWriter.createConfigMap(ctx, book, cm)
	w.wrote(book, configMapsResource, verbCreate, created, err, start)
	return created, err
}

func (w observedWriter) updateConfigMap(ctx context.Context, book *webappv2.Book, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	start := time.Now()
	updated, err := w.apiWriter.updateConfigMap(ctx, book, cm)
	w.wrote(book, configMapsResource, verbUpdate, updated, err, start)
	return updated, err
}

func (w observedWriter) updateStatus(ctx context.Context, book *webappv2.Book) (*webappv2.Book, error) {
	start := time.Now()
	updated, err := w.apiWriter.updateStatus(ctx, book)
	w.wrote(book, booksResource, verbUpdateStatus, updated, err, start)
	return updated, err
}

func (w observedWriter) wrote(book *webappv2.Book, r resource, verb string, obj object, err error, start time.Time) {
	rv := ""
	if err == nil {
		rv = obj.GetResourceVersion()
	}
	w.observer.Wrote(APIWrite{Key: cache.MetaObjectToName(book), Resource: r.String(), Verb: verb,
		ResourceVersion: rv, Err: err, Duration: time.Since(start)})
}

// observingRateLimiter tells the observer each backoff the queue's rate
// limiter hands out. New installs it only when there is an observer.
type observingRateLimiter struct {
	workqueue.TypedRateLimiter[cache.ObjectName]
	observer Observer
}

func (r observingRateLimiter) When(key cache.ObjectName) time.Duration {
	d := r.TypedRateLimiter.When(key)
	r.observer.Backoff(key, d)
	return d
}

// observeRelists counts an informer's relists: client-go offers no hook for
// a relist as such, but every relist follows a watch that ended in an error
// handed to the informer's WatchErrorHandler. client-go's default handler
// (its log line) still runs. Call before the informer starts.
func (c *Controller) observeRelists(informer cache.SharedIndexInformer, name Informer) error {
	obs := c.observer
	return informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		obs.Relist(name, err)
	})
}
