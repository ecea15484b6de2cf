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

// Package controller is the Book controller: informers feed a rate-limited
// work queue, workers drain it, and syncHandler makes each Book's ConfigMap
// and status match its spec. Read this file top to bottom in the order the
// controller-runtime lesson explains a Controller: the struct, the watches
// (New), Run (Start), the worker loop and the one switch from a sync's
// outcome to the queue (reconcileHandler). Every queue call but the event
// handlers' Add is in this file.
package controller

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	bookinformers "ydzs.io/book-controller/pkg/generated/informers/externalversions/webapp/v2"
	booklisters "ydzs.io/book-controller/pkg/generated/listers/webapp/v2"
	"ydzs.io/book-controller/pkg/metrics"
)

// Name is the controller's name: the work queue's name, and so the name
// label of the workqueue_* metrics and the controller label of ours.
const Name = "book"

// Defaults for Options fields left zero.
const (
	DefaultConflictRecheck = 30 * time.Second
	DefaultDrainTimeout    = 20 * time.Second
)

// defaultCacheLagRecheck is when a Book waiting for its own ConfigMap to
// reach the cache is looked at again (sync.go, waitForCache). It decides
// nothing: resourceVersions say when the cache has caught up. It only wakes a
// Book that no event will wake, as kube's expectations time out after five
// minutes; a ConfigMap per Book is cheap to look at again.
const defaultCacheLagRecheck = 30 * time.Second

// Options tune a Controller. The zero value is valid.
type Options struct {
	// Clock stamps condition transition times; tests pass a fake one.
	Clock clock.PassiveClock
	// RateLimiter spaces out retries of failing keys. The default is
	// per-key exponential backoff from 5ms to 1000s, under an overall token
	// bucket of 100 retries per second, burst 1000. (client-go's default
	// bucket, 10/s burst 100, makes recovery from an API server outage take
	// N/10 seconds for N failed Books: 15 minutes for 10000.)
	RateLimiter workqueue.TypedRateLimiter[cache.ObjectName]
	// ConflictRecheck is how often a Book whose ConfigMap name is taken by a
	// foreign object is looked at again. The foreign object is outside the
	// label-filtered cache, so its deletion raises no event. It is also the
	// longest wait between retries of a write the API server refused
	// (refusal.go): a quota raised or a policy deleted raises none either.
	ConflictRecheck time.Duration
	// DrainTimeout bounds how long Run waits, after its context ends, for
	// the queued and in-flight keys to finish before cancelling them.
	DrainTimeout time.Duration
	// Off turns optimization layers off (layers.go); the zero value keeps
	// them all on, and Off: AllLayers() runs sample-controller's loop.
	Off Layers
	// Observer, when set, is told each step of each Book's way through the
	// controller (observer.go); nil, the default, costs nothing.
	Observer Observer
}

// Result tells the worker loop what to do with a key after a successful
// sync, as controller-runtime's reconcile.Result does. The zero Result
// means done: the key is forgotten until an event brings it back.
type Result struct {
	// RequeueAfter, when positive, syncs the key again after this long:
	// for what no event will announce (a foreign ConfigMap's deletion, a
	// cache that moved past our write in silence).
	RequeueAfter time.Duration

	// waiting says the sync did nothing but wait for the caches to show our
	// own writes (waitForCache): neither a success nor a failure, so the key
	// keeps its backoff. Forgetting it there would restart a refused Book's
	// backoff at its first step after each of its status writes.
	waiting bool
}

// Controller reconciles Books. It is the hand-written counterpart of
// controller-runtime's internal Controller: the informers' handlers play
// the part of Watch with EnqueueRequestForObject / EnqueueRequestForOwner,
// the queue and workers that of Start, and syncHandler that of Reconcile.
type Controller struct {
	kubeClient kubernetes.Interface
	bookClient versioned.Interface

	booksLister      booklisters.BookLister
	booksSynced      cache.InformerSynced
	configMaps       configMapStore
	configMapsSynced cache.InformerSynced

	// queue holds namespace/name keys of Books that may need work. A key is
	// in the queue at most once and is never handed to two workers at once,
	// so a Book is synced by one goroutine at a time.
	queue workqueue.TypedRateLimitingInterface[cache.ObjectName]
	// writes makes the sync's API writes (writes.go).
	writes   apiWriter
	recorder events.EventRecorder
	clock    clock.PassiveClock

	conflictRecheck time.Duration
	cacheLagRecheck time.Duration
	drainTimeout    time.Duration

	// The optimization layers' seams (layers.go), each the layer or its
	// classic stand-in.
	ownWrites   writeTracker     // ownwrites.go
	order       queueOrder       // livefirst.go
	connections connectionOpener // connections.go
	readiness   readinessTracker // notready.go
	// bookTransform is the Book informer's transform (bookcache.go), nil
	// to cache Books as decoded.
	bookTransform cache.TransformFunc
	// observer is Options.Observer, nil when nobody watches.
	observer Observer

	// aborted ends when Abort is called, with its cause; see Abort.
	aborted context.Context
	abort   context.CancelCauseFunc

	// syncHandler reconciles one key: syncBook. Tests replace it (to inject
	// a panic, for instance) after New and before Run, which only reads it.
	syncHandler func(ctx context.Context, key cache.ObjectName) (Result, error)
}

// New wires a Controller to its informers: it installs their transforms and
// registers the event handlers (the watches), but starts nothing. Start the
// informer factories after New, then call Run. opts.Off chooses, layer by
// layer, between each optimization and its classic stand-in (useLayers).
func New(
	kubeClient kubernetes.Interface,
	bookClient versioned.Interface,
	bookInformer bookinformers.BookInformer,
	configMapInformer coreinformers.ConfigMapInformer,
	recorder events.EventRecorder,
	opts Options,
) (*Controller, error) {
	opts = withDefaults(opts)
	if opts.Observer != nil {
		opts.RateLimiter = observingRateLimiter{TypedRateLimiter: opts.RateLimiter, observer: opts.Observer}
	}
	c := &Controller{
		kubeClient:      kubeClient,
		bookClient:      bookClient,
		booksLister:     bookInformer.Lister(),
		recorder:        recorder,
		clock:           opts.Clock,
		conflictRecheck: opts.ConflictRecheck,
		cacheLagRecheck: defaultCacheLagRecheck,
		drainTimeout:    opts.DrainTimeout,
		observer:        opts.Observer,
	}
	var writes apiWriter = clientWriter{kube: kubeClient, books: bookClient}
	if opts.Observer != nil {
		writes = observedWriter{apiWriter: writes, observer: opts.Observer}
	}
	storage := c.useLayers(opts.Off, bookInformer, configMapInformer)
	c.writes = c.ownWrites.wrap(writes)
	c.queue = newQueue(opts.RateLimiter, storage)
	c.aborted, c.abort = context.WithCancelCause(context.Background())
	c.syncHandler = c.syncBook
	metrics.InitController(Name)
	if err := c.watch(bookInformer.Informer(), configMapInformer.Informer()); err != nil {
		return nil, err
	}
	return c, nil
}

// newQueue builds client-go's rate-limiting work queue, the lesson's
// MakeQueue, on storage (the order in which it hands keys out) or, when
// storage is nil, on client-go's FIFO.
func newQueue(limiter workqueue.TypedRateLimiter[cache.ObjectName], storage workqueue.Queue[cache.ObjectName]) workqueue.TypedRateLimitingInterface[cache.ObjectName] {
	if storage == nil {
		return workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: Name})
	}
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{
		Name: Name,
		DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[cache.ObjectName]{
			Name:  Name,
			Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[cache.ObjectName]{Name: Name, Queue: storage}),
		}),
	})
}

func withDefaults(opts Options) Options {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](5*time.Millisecond, 1000*time.Second),
			&workqueue.TypedBucketRateLimiter[cache.ObjectName]{Limiter: rate.NewLimiter(rate.Limit(100), 1000)},
		)
	}
	if opts.ConflictRecheck <= 0 {
		opts.ConflictRecheck = DefaultConflictRecheck
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	return opts
}

// watch installs the caches' transforms and registers the event handlers,
// controller-runtime's Watch with source.Kind. The informers must not have
// started: a transform set later would leave objects of both kinds in the
// cache.
func (c *Controller) watch(books, configMaps cache.SharedIndexInformer) error {
	if c.bookTransform != nil {
		if err := books.SetTransform(c.bookTransform); err != nil {
			return fmt.Errorf("setting the Book informer's transform: %w", err)
		}
	}
	if transform := c.configMaps.transformFunc(); transform != nil {
		if err := configMaps.SetTransform(transform); err != nil {
			return fmt.Errorf("setting the ConfigMap informer's transform: %w", err)
		}
	}
	// The registrations' HasSynced, unlike the informers', also waits until
	// our handlers have seen the initial list, so Run starts with a full queue.
	bookReg, err := books.AddEventHandler(c.bookEventHandler())
	if err != nil {
		return fmt.Errorf("registering Book event handler: %w", err)
	}
	cmReg, err := configMaps.AddEventHandler(c.configMapEventHandler())
	if err != nil {
		return fmt.Errorf("registering ConfigMap event handler: %w", err)
	}
	c.booksSynced, c.configMapsSynced = bookReg.HasSynced, cmReg.HasSynced
	if c.observer == nil {
		return nil
	}
	if err := c.observeRelists(books, BooksInformer); err != nil {
		return fmt.Errorf("watching the Book informer's relists: %w", err)
	}
	if err := c.observeRelists(configMaps, ConfigMapsInformer); err != nil {
		return fmt.Errorf("watching the ConfigMap informer's relists: %w", err)
	}
	return nil
}

// Run waits for the caches, starts the workers and blocks until ctx ends.
// Then it stops taking new keys, lets the workers finish what is queued (up
// to the drain timeout), waits for them and returns. Abort cuts any of this
// short: before the caches sync, while the workers run, or in the middle of
// the drain.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer c.queue.ShutDown()
	c.readiness.start()
	defer c.readiness.stop()
	if workers < 1 {
		return fmt.Errorf("workers must be at least 1, got %d", workers)
	}
	untilAbort, cancel := c.untilAbort(ctx)
	defer cancel()
	if started, err := c.waitForCaches(untilAbort); !started {
		return err
	}
	c.connections.open(untilAbort)
	pool := c.startWorkers(ctx, workers)
	c.stopWorkers(ctx, pool)
	return nil
}

// untilAbort returns a context that ends with ctx or with Abort.
func (c *Controller) untilAbort(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.aborted, cancel)
	return ctx, func() { stop(); cancel() }
}

// waitForCaches waits until both caches hold their initial lists and our
// handlers have seen them. It reports false, with no error, when ctx ended
// (or Abort came) first: a standby told to stop as it takes the Lease must
// not start workers. WaitForCacheSync looks at the caches before the
// context, so warm caches alone would report success; Abort is checked
// itself because untilAbort's AfterFunc runs on a goroutine of its own.
func (c *Controller) waitForCaches(ctx context.Context) (bool, error) {
	klog.FromContext(ctx).Info("Waiting for informer caches to sync")
	synced := cache.WaitForNamedCacheSyncWithContext(ctx, c.booksSynced, c.configMapsSynced)
	switch {
	case ctx.Err() != nil || c.aborted.Err() != nil:
		return false, nil
	case !synced:
		return false, errors.New("informer caches did not sync")
	}
	return true, nil
}

// workerPool is the running workers: cancel ends the syncs in flight.
type workerPool struct {
	wg     sync.WaitGroup
	cancel context.CancelCauseFunc
}

// startWorkers starts n workers. They get a context of their own so that a
// shutdown lets in-flight writes finish instead of failing them all at once;
// only Abort and the drain timeout cancel it.
func (c *Controller) startWorkers(ctx context.Context, n int) *workerPool {
	workerCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	pool := &workerPool{cancel: cancel}
	klog.FromContext(ctx).Info("Starting workers", "count", n)
	for i := range n {
		pool.wg.Go(func() { c.runWorker(workerCtx, i) })
	}
	return pool
}

// stopWorkers waits for ctx to end, then drains the queue, or for Abort,
// then stops the workers at once; it returns when every worker has.
func (c *Controller) stopWorkers(ctx context.Context, pool *workerPool) {
	logger := klog.FromContext(ctx)
	select {
	case <-ctx.Done():
		c.drain(ctx, pool)
	case <-c.aborted.Done():
		logger.Info("Stopping workers at once", "cause", context.Cause(c.aborted), "depth", c.queue.Len())
		pool.cancel(context.Cause(c.aborted))
	}
	c.queue.ShutDown()
	pool.wg.Wait()
	pool.cancel(nil)
	logger.Info("Workers stopped")
}

// drain stops the queue taking new keys and waits until the workers have
// finished the keys queued and in flight, for at most the drain timeout and
// only until Abort: then the syncs in flight are cancelled and the keys
// left are dropped.
func (c *Controller) drain(ctx context.Context, pool *workerPool) {
	logger := klog.FromContext(ctx)
	logger.Info("Shutting down: draining the work queue", "depth", c.queue.Len(), "timeout", c.drainTimeout)
	// Workers keep taking keys from a shut-down queue until it is empty.
	c.queue.ShutDown()
	stopped := make(chan struct{}) // closed once every worker has returned
	go func() {
		defer close(stopped)
		pool.wg.Wait()
	}()
	timeout := time.NewTimer(c.drainTimeout)
	defer timeout.Stop()
	select {
	case <-stopped:
		return
	case <-timeout.C:
		logger.Info("Drain timed out; cancelling in-flight work", "depth", c.queue.Len())
		pool.cancel(errDrainTimeout)
	case <-c.aborted.Done():
		logger.Info("Drain aborted; cancelling in-flight work", "cause", context.Cause(c.aborted), "depth", c.queue.Len())
		pool.cancel(context.Cause(c.aborted))
	}
	<-stopped
}

var errDrainTimeout = errors.New("drain timed out")

// Abort stops the controller at once, for when this process has lost the
// right to write (it lost the leader-election Lease): Run cancels the syncs
// in flight, drops the queued keys and returns, also in the middle of a
// drain, and a Run that has not started its workers returns without
// starting them. Abort also shuts the work queue down, which releases its
// goroutines when Run is never called. Safe to call at any time, more than
// once; the first cause is the one reported.
func (c *Controller) Abort(cause error) {
	c.abort(cause)
	c.queue.ShutDown()
}

// HasSynced reports whether both caches hold their initial lists and the
// handlers have seen them: the readiness of the controller.
func (c *Controller) HasSynced() bool {
	return c.booksSynced() && c.configMapsSynced()
}

// runWorker drains the queue until it shuts down, or until its context is
// cancelled (Abort, drain timeout): then the keys left are not synced at all,
// rather than each failing on the cancelled context.
func (c *Controller) runWorker(ctx context.Context, worker int) {
	for ctx.Err() == nil && c.processNextWorkItem(ctx, worker) {
	}
}

// processNextWorkItem takes one key, syncs it and hands the outcome to
// reconcileHandler. Done always releases the key, so that events that
// arrived meanwhile get processed. worker numbers the worker, for the
// Observer.
func (c *Controller) processNextWorkItem(ctx context.Context, worker int) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)

	if c.observer != nil {
		c.observer.WorkerBusy(worker, key)
	}
	metrics.ActiveWorkers.WithLabelValues(Name).Inc()
	start := time.Now()
	res, err := c.syncRecovering(ctx, key)
	took := time.Since(start)
	metrics.ReconcileTime.WithLabelValues(Name).Observe(took.Seconds())
	metrics.ActiveWorkers.WithLabelValues(Name).Dec()
	result, refusal := c.reconcileHandler(ctx, key, res, err)
	if c.observer != nil {
		c.observer.Synced(SyncOutcome{Worker: worker, Key: key, Result: result, Refusal: refusal, Err: err,
			RequeueAfter: res.RequeueAfter, Duration: took})
	}
	return true
}

// reconcileHandler is the one place where a sync's outcome becomes a queue
// call and a reconcile-metric label, as in controller-runtime's
// reconcileHandler. Forget resets the key's backoff; AddRateLimited retries
// it after that backoff, which doubles per failure. It returns the label,
// and the Ready reason of a refused write (for the Observer).
func (c *Controller) reconcileHandler(ctx context.Context, key cache.ObjectName, res Result, err error) (result, refusal string) {
	var refused *refusalError
	switch {
	case err == nil:
		result = metrics.ResultSuccess
		if !res.waiting {
			c.queue.Forget(key)
		}
		if res.RequeueAfter > 0 {
			result = metrics.ResultRequeueAfter
			c.queue.AddAfter(key, res.RequeueAfter)
		}
	case apierrors.IsConflict(err):
		// Our cache was behind the server; the watch will catch up and the
		// retry will see the newer object. Not worth an error log.
		result = metrics.ResultConflict
		klog.FromContext(ctx).V(2).Info("Conflict writing; requeueing", "key", key, "err", err)
		c.queue.AddRateLimited(key)
	case errors.As(err, &refused):
		// The API server refused the write (refusal.go); the Book's status
		// says why. Back off as for any error, but retry within the recheck
		// at the latest, since the fix raises no event: of two delays for
		// one key, the delaying queue keeps the earlier.
		result = metrics.ResultError
		metrics.ReconcileErrors.WithLabelValues(Name).Inc()
		klog.FromContext(ctx).V(1).Info("API server refused the write; retrying with backoff", "key", key, "reason", refused.reason, "err", err)
		c.queue.AddRateLimited(key)
		c.queue.AddAfter(key, c.conflictRecheck)
		refusal = refused.reason
	default:
		result = metrics.ResultError
		metrics.ReconcileErrors.WithLabelValues(Name).Inc()
		utilruntime.HandleErrorWithContext(ctx, err, "Syncing Book failed; requeueing", "key", key)
		c.queue.AddRateLimited(key)
	}
	metrics.ReconcileTotal.WithLabelValues(Name, result).Inc()
	return result, refusal
}

// syncRecovering calls syncHandler and turns a panic into an error, so one bad
// object cannot take the process down and is retried with backoff instead.
func (c *Controller) syncRecovering(ctx context.Context, key cache.ObjectName) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			metrics.ReconcilePanics.WithLabelValues(Name).Inc()
			klog.FromContext(ctx).Error(nil, "Panic while syncing Book", "key", key, "panic", r, "stack", string(debug.Stack()))
			res, err = Result{}, fmt.Errorf("panic while syncing %s: %v", key, r)
		}
	}()
	return c.syncHandler(ctx, key)
}
