package manager

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/controller"
	booklisters "ydzs.io/book-controller/pkg/generated/listers/webapp/v1"
)

// shardWork is what a replica runs for one shard while it holds the
// shard's Lease: a Book informer and a ConfigMap informer that list and
// watch that shard only, and a controller instance on them, writing through
// the shard's fenced clients. Nothing of it exists before the Lease is
// acquired (a spare caches nothing) and nothing is left once Run returns:
// the caches of a shard that moved to another replica are dropped.
type shardWork struct {
	shard   Shard
	reads   *clients
	writers *writers
	// limiter is the process's Event token bucket, nil for none.
	limiter flowcontrol.RateLimiter
	resync  time.Duration
	opts    controller.Options
	workers int

	mu      sync.Mutex
	aborted error // set by Abort
	ctrl    *controller.Controller
	books   booklisters.BookLister
}

// Run builds the shard's informers and controller, starts the informers
// and runs the controller until ctx ends and it has drained, or until
// Abort; then it stops the informers and waits for them.
func (w *shardWork) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("shard", w.shard.Index)
	ctx = klog.NewContext(ctx, logger)
	// Events outlive ctx by the drain: the last syncs may still report.
	eventCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEvents()
	recorder, err := newEventRecorder(eventCtx, w.writers.kube, w.limiter)
	if err != nil {
		return err
	}
	kubeFactory, bookFactory := NewInformerFactories(w.reads.kubeReads, w.reads.bookReads, "", w.resync, w.shard.Selector())
	c, err := controller.New(w.writers.kube, w.writers.books, bookFactory.Webapp().V1().Books(),
		kubeFactory.Core().V1().ConfigMaps(), recorder, w.opts)
	if err != nil {
		return fmt.Errorf("shard %d: %w", w.shard.Index, err)
	}
	w.mu.Lock()
	if w.aborted != nil {
		w.mu.Unlock()
		c.Abort(w.aborted)
		return nil
	}
	w.ctrl, w.books = c, bookFactory.Webapp().V1().Books().Lister()
	w.mu.Unlock()

	// The informers stop when Run returns, whatever ctx does: after a lost
	// Lease, ctx has not ended.
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		stopInformers()
		kubeFactory.Shutdown()
		bookFactory.Shutdown()
		w.mu.Lock()
		w.ctrl, w.books = nil, nil
		w.mu.Unlock()
		logger.Info("Dropped the shard's caches")
	}()
	kubeFactory.Start(informerCtx.Done())
	bookFactory.Start(informerCtx.Done())
	logger.Info("Watching the shard", "selector", w.shard.Selector())
	return c.Run(ctx, w.workers)
}

// Abort stops the controller at once, or keeps Run from starting it.
func (w *shardWork) Abort(cause error) {
	w.mu.Lock()
	if w.aborted == nil {
		w.aborted = cause
	}
	c := w.ctrl
	w.mu.Unlock()
	if c != nil {
		c.Abort(cause)
	}
}

// synced reports whether the shard's caches hold their initial lists.
func (w *shardWork) synced() bool {
	w.mu.Lock()
	c := w.ctrl
	w.mu.Unlock()
	return c != nil && c.HasSynced()
}

// cachedBooks is the number of Books in the shard's cache; ok is false
// while there is no cache.
func (w *shardWork) cachedBooks() (n int, ok bool) {
	w.mu.Lock()
	books := w.books
	w.mu.Unlock()
	if books == nil {
		return 0, false
	}
	list, err := books.List(labels.Everything())
	if err != nil {
		return 0, false
	}
	return len(list), true
}
