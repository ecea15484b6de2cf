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

package shard

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/leader"
)

// Stack is one shard's informers and controller, as pkg/manager builds
// them (Config.Build): informers that list and watch that shard only, an
// Event recorder, and a controller on them, writing through the shard's
// fenced clients.
type Stack interface {
	// Start starts the informers.
	Start()
	// Run runs the controller until ctx ends and it has drained, or until
	// Abort.
	Run(ctx context.Context) error
	// Abort stops the controller at once, or keeps Run from starting it.
	Abort(cause error)
	// HasSynced reports whether the caches hold their initial lists.
	HasSynced() bool
	// CachedBooks is the number of Books in the cache.
	CachedBooks() int
	// CachedConfigMaps is the number of ConfigMaps in the cache.
	CachedConfigMaps() int
	// Stop stops the informers and waits for them, and stops whatever else
	// Build started (the Event broadcaster).
	Stop()
}

// work is what a replica runs for one shard while it holds the shard's
// Lease: the leader.Work of the shard's elector. Nothing of it exists
// before the Lease is acquired (a spare caches nothing) and nothing is left
// once Run returns: the caches of a shard that moved to another replica are
// dropped.
type work struct {
	shard Shard
	build func(ctx context.Context) (Stack, error)
	// check, if not nil, is the count guard's, run again once the Lease is
	// acquired and before anything is built (count.go says why).
	check func(ctx context.Context) error

	// mu guards aborted and stack: Run's goroutine sets and clears stack,
	// the elector's Run calls Abort from its own, and the probes and the
	// metrics scrape read stack (synced, cached).
	mu      sync.Mutex
	aborted error // the first Abort's cause
	stack   Stack // nil before Build and after Run
}

var _ leader.Work = (*work)(nil)

// errGaveBack is wrapped by the error of a work that gave its Lease back,
// having written nothing, because the check right after the acquisition
// failed: its slot stands by for the shard again.
var errGaveBack = errors.New("gave the shard back right after acquiring it")

// Run builds the shard's stack, starts its informers and runs its
// controller until ctx ends and it has drained, or until Abort; then it
// stops the informers and waits for them.
func (w *work) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("shard", w.shard.Index)
	ctx = klog.NewContext(ctx, logger)
	if w.check != nil {
		if err := w.check(ctx); err != nil {
			return fmt.Errorf("%w: %w", errGaveBack, err)
		}
	}
	stack, err := w.build(ctx)
	if err != nil {
		return err
	}
	if cause := w.set(stack); cause != nil {
		stack.Abort(cause)
		stack.Stop()
		return nil
	}
	// The informers stop when Run returns, whatever ctx does: after a lost
	// Lease, ctx has not ended.
	defer func() {
		stack.Stop()
		w.set(nil)
		logger.Info("Dropped the shard's caches")
	}()
	stack.Start()
	logger.Info("Watching the shard", "selector", w.shard.Selector())
	return stack.Run(ctx)
}

// set makes stack the current one, unless the work was aborted: then it
// returns the cause and changes nothing.
func (w *work) set(stack Stack) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if stack != nil && w.aborted != nil {
		return w.aborted
	}
	w.stack = stack
	return nil
}

func (w *work) current() Stack {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stack
}

// Abort stops the controller at once, or keeps Run from starting it.
func (w *work) Abort(cause error) {
	w.mu.Lock()
	if w.aborted == nil {
		w.aborted = cause
	}
	stack := w.stack
	w.mu.Unlock()
	if stack != nil {
		stack.Abort(cause)
	}
}

// synced reports whether the shard's caches hold their initial lists.
func (w *work) synced() bool {
	stack := w.current()
	return stack != nil && stack.HasSynced()
}

// cached is the number of Books and of ConfigMaps in the shard's caches;
// ok is false while there are no caches.
func (w *work) cached() (books, configMaps int, ok bool) {
	stack := w.current()
	if stack == nil {
		return 0, 0, false
	}
	return stack.CachedBooks(), stack.CachedConfigMaps(), true
}
