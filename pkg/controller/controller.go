// Package controller is the Book controller: informers feed a rate-limited
// work queue, workers drain it, and syncHandler makes each Book's ConfigMap
// and status match its spec. Read this file top to bottom in the order the
// controller-runtime lesson explains a Controller: the struct, the watches,
// Run, the worker loop and the reconcile call.
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	bookinformers "ydzs.io/book-controller/pkg/generated/informers/externalversions/webapp/v1"
	booklisters "ydzs.io/book-controller/pkg/generated/listers/webapp/v1"
	"ydzs.io/book-controller/pkg/metrics"
)

// Name is the controller's name: the work queue's name (and so its metrics
// label) and the prefix of its log lines.
const Name = "book"

// Defaults for Options fields left zero.
const (
	DefaultConflictRecheck = 30 * time.Second
	DefaultDrainTimeout    = 20 * time.Second
)

// defaultCacheLagRecheck is how long a Book waiting for its own ConfigMap to
// reach the cache is left before a sync looks again (see awaitOwnWrite). It
// decides nothing: resourceVersions say when the cache has caught up. It
// only wakes a Book that no event will wake, as kube's expectations time out
// after five minutes; a ConfigMap per Book is cheap to look at again.
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
	// label-filtered cache, so its deletion raises no event.
	ConflictRecheck time.Duration
	// DrainTimeout bounds how long Run waits, after its context ends, for
	// the queued and in-flight keys to finish before cancelling them.
	DrainTimeout time.Duration
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
	configMaps       cachedConfigMapGetter
	configMapsSynced cache.InformerSynced

	// queue holds namespace/name keys of Books that may need work. A key is
	// in the queue at most once and is never handed to two workers at once,
	// so a Book is synced by one goroutine at a time.
	queue    workqueue.TypedRateLimitingInterface[cache.ObjectName]
	recorder events.EventRecorder
	clock    clock.PassiveClock

	conflictRecheck time.Duration
	drainTimeout    time.Duration

	// aborted ends when Abort is called, with its cause; see Abort.
	aborted context.Context
	abort   context.CancelCauseFunc

	// consistency holds our own writes until the caches show them; see
	// consistency.go. cacheLagRecheck is when a Book waiting for its own
	// ConfigMap to reach the cache is looked at again (awaitOwnWrite).
	consistency     *consistencyStore
	cacheLagRecheck time.Duration

	// syncHandler reconciles one key. It is a field so tests can observe
	// or replace it (to inject a panic, for instance).
	syncHandler func(ctx context.Context, key cache.ObjectName) error
}

// New wires a Controller to its informers: it registers the event handlers
// (the watches) but starts nothing. Start the informer factories after New,
// then call Run.
func New(
	kubeClient kubernetes.Interface,
	bookClient versioned.Interface,
	bookInformer bookinformers.BookInformer,
	configMapInformer coreinformers.ConfigMapInformer,
	recorder events.EventRecorder,
	opts Options,
) (*Controller, error) {
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
	c := &Controller{
		kubeClient:  kubeClient,
		bookClient:  bookClient,
		booksLister: bookInformer.Lister(),
		configMaps:  cachedConfigMapGetter{indexer: configMapInformer.Informer().GetIndexer()},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(opts.RateLimiter,
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: Name}),
		recorder:        recorder,
		clock:           opts.Clock,
		conflictRecheck: opts.ConflictRecheck,
		drainTimeout:    opts.DrainTimeout,
		consistency: newConsistencyStore(map[schema.GroupResource]storeVersion{
			booksResource:      bookInformer.Informer().GetStore(),
			configMapsResource: configMapInformer.Informer().GetStore(),
		}),
		cacheLagRecheck: defaultCacheLagRecheck,
	}
	c.aborted, c.abort = context.WithCancelCause(context.Background())
	c.syncHandler = c.syncBook
	metrics.InitController(Name)

	// The caches keep Books compacted (bookcache.go) and of ConfigMaps only
	// what the sync reads (configmapcache.go). The informers must not have
	// started: a transform set later would leave objects of both kinds in
	// the cache.
	if err := bookInformer.Informer().SetTransform(BookTransform()); err != nil {
		return nil, fmt.Errorf("setting the Book informer's transform: %w", err)
	}
	if err := configMapInformer.Informer().SetTransform(c.projectCachedConfigMap); err != nil {
		return nil, fmt.Errorf("setting the ConfigMap informer's transform: %w", err)
	}

	// The registrations' HasSynced, unlike the informers', also waits until
	// our handlers have seen the initial list, so Run starts with a full queue.
	bookReg, err := bookInformer.Informer().AddEventHandler(c.bookEventHandler())
	if err != nil {
		return nil, fmt.Errorf("registering Book event handler: %w", err)
	}
	cmReg, err := configMapInformer.Informer().AddEventHandler(c.configMapEventHandler())
	if err != nil {
		return nil, fmt.Errorf("registering ConfigMap event handler: %w", err)
	}
	c.booksSynced = bookReg.HasSynced
	c.configMapsSynced = cmReg.HasSynced
	return c, nil
}

// Run waits for the caches, starts one goroutine per worker and blocks until ctx
// ends. Then it stops taking new keys, lets the workers finish what is
// queued (up to the drain timeout), waits for them and returns. Abort cuts
// any of this short: before the caches sync, while the workers run, or in
// the middle of the drain.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)
	if workers < 1 {
		return fmt.Errorf("workers must be at least 1, got %d", workers)
	}

	logger.Info("Waiting for informer caches to sync")
	syncCtx, stopSync := context.WithCancel(ctx)
	defer stopSync()
	stopOnAbort := context.AfterFunc(c.aborted, stopSync)
	defer stopOnAbort()
	synced := cache.WaitForNamedCacheSyncWithContext(syncCtx, c.booksSynced, c.configMapsSynced)
	// WaitForCacheSync looks at the caches before it looks at the context,
	// so warm caches report success even when Run was asked to stop (or
	// aborted) before it began: a standby told to stop as it takes the
	// Lease must not start workers. c.aborted is checked itself because
	// the AfterFunc above cancels syncCtx from a goroutine of its own, which
	// may not have run yet.
	if syncCtx.Err() != nil || c.aborted.Err() != nil {
		return nil
	}
	if !synced {
		return errors.New("informer caches did not sync")
	}
	// Ended, like the wait for the caches, by Abort.
	c.openConnections(syncCtx)

	// Workers get a context of their own so that a shutdown lets in-flight
	// writes finish instead of failing them all at once; only Abort and the
	// drain timeout cancel it.
	workerCtx, cancelWorkers := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelWorkers(nil)
	var wg sync.WaitGroup
	logger.Info("Starting workers", "count", workers)
	for range workers {
		wg.Go(func() { c.runWorker(workerCtx) })
	}

	select {
	case <-ctx.Done():
		c.drain(ctx, &wg, cancelWorkers)
	case <-c.aborted.Done():
		logger.Info("Stopping workers at once", "cause", context.Cause(c.aborted), "depth", c.queue.Len())
		cancelWorkers(context.Cause(c.aborted))
	}
	c.queue.ShutDown()
	wg.Wait()
	logger.Info("Workers stopped")
	return nil
}

// drain stops the queue taking new keys and waits until the workers have
// finished the keys queued and in flight, for at most the drain timeout and
// only until Abort: then the syncs in flight are cancelled and the keys
// left are dropped.
func (c *Controller) drain(ctx context.Context, workers *sync.WaitGroup, cancelWorkers context.CancelCauseFunc) {
	logger := klog.FromContext(ctx)
	logger.Info("Shutting down: draining the work queue", "depth", c.queue.Len(), "timeout", c.drainTimeout)
	// Workers keep taking keys from a shut-down queue until it is empty.
	c.queue.ShutDown()
	stopped := make(chan struct{}) // closed by the goroutine below once every worker has returned
	go func() {
		defer close(stopped)
		workers.Wait()
	}()
	timeout := time.NewTimer(c.drainTimeout)
	defer timeout.Stop()
	select {
	case <-stopped:
		return
	case <-timeout.C:
		logger.Info("Drain timed out; cancelling in-flight work", "depth", c.queue.Len())
		cancelWorkers(errDrainTimeout)
	case <-c.aborted.Done():
		logger.Info("Drain aborted; cancelling in-flight work", "cause", context.Cause(c.aborted), "depth", c.queue.Len())
		cancelWorkers(context.Cause(c.aborted))
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
func (c *Controller) runWorker(ctx context.Context) {
	for ctx.Err() == nil && c.processNextWorkItem(ctx) {
	}
}

// processNextWorkItem takes one key, syncs it, and tells the queue the
// outcome: Forget resets the key's backoff on success, AddRateLimited retries
// it later on failure, and Done always releases the key so that events that
// arrived meanwhile get processed.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)

	metrics.ActiveWorkers.WithLabelValues(Name).Inc()
	start := time.Now()
	err := c.syncRecovering(ctx, key)
	metrics.ReconcileTime.WithLabelValues(Name).Observe(time.Since(start).Seconds())
	metrics.ActiveWorkers.WithLabelValues(Name).Dec()

	switch {
	case err == nil:
		metrics.ReconcileTotal.WithLabelValues(Name, metrics.ResultSuccess).Inc()
		c.queue.Forget(key)
	case apierrors.IsConflict(err):
		// Our cache was behind the server; the watch will catch up and the
		// retry will see the newer object. Not worth an error log.
		metrics.ReconcileTotal.WithLabelValues(Name, metrics.ResultConflict).Inc()
		klog.FromContext(ctx).V(2).Info("Conflict writing; requeueing", "key", key, "err", err)
		c.queue.AddRateLimited(key)
	default:
		metrics.ReconcileTotal.WithLabelValues(Name, metrics.ResultError).Inc()
		metrics.ReconcileErrors.WithLabelValues(Name).Inc()
		utilruntime.HandleErrorWithContext(ctx, err, "Syncing Book failed; requeueing", "key", key)
		c.queue.AddRateLimited(key)
	}
	return true
}

// syncRecovering calls syncHandler and turns a panic into an error, so one bad
// object cannot take the process down and is retried with backoff instead.
func (c *Controller) syncRecovering(ctx context.Context, key cache.ObjectName) (err error) {
	defer func() {
		if r := recover(); r != nil {
			metrics.ReconcilePanics.WithLabelValues(Name).Inc()
			klog.FromContext(ctx).Error(nil, "Panic while syncing Book", "key", key, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic while syncing %s: %v", key, r)
		}
	}()
	return c.syncHandler(ctx, key)
}
