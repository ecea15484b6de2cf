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
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/tools/cache"

	"ydzs.io/book-controller/internal/poll"
)

// runInformers starts the fixture's informers (on the fake clients) until
// the end of the test.
func (f *fixture) runInformers() {
	ctx, stop := context.WithCancel(context.Background())
	f.kubeFactory.Start(ctx.Done())
	f.bookFactory.Start(ctx.Done())
	f.t.Cleanup(func() {
		stop()
		f.kubeFactory.Shutdown()
		f.bookFactory.Shutdown()
	})
}

// startInformers runs the informers and waits until the controller's
// handlers have seen the initial lists, so that Run finds its caches synced.
func (f *fixture) startInformers() {
	f.t.Helper()
	f.runInformers()
	poll.Eventually(f.t, "the caches to sync", pollInterval, pollTimeout, func(context.Context) error {
		return poll.Done(f.c.HasSynced(), "not synced")
	})
}

// countSyncs replaces the syncHandler with one that counts its calls.
func (f *fixture) countSyncs() *atomic.Int32 {
	var n atomic.Int32
	f.c.syncHandler = func(context.Context, cache.ObjectName) (Result, error) {
		n.Add(1)
		return Result{}, nil
	}
	return &n
}

// TestRunOnAnEndedContextStartsNoWorker: a standby that is told to stop just
// as it takes the Lease calls Run with a context that has already ended,
// while its caches are warm. client-go's WaitForCacheSync then reports
// success, and a Run that trusted it would start workers and drain the whole
// queue after the Lease was released.
func TestRunOnAnEndedContextStartsNoWorker(t *testing.T) {
	f := newFixture(t, Options{})
	f.startInformers()
	syncs := f.countSyncs()
	f.c.queue.Add(bookKey("queued"))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.c.Run(ctx, 2); err != nil {
		t.Errorf("Run: %v", err)
	}
	if n := syncs.Load(); n != 0 {
		t.Errorf("Run on an ended context synced %d keys, want 0", n)
	}
	if !f.c.queue.ShuttingDown() {
		t.Error("the queue is not shut down after Run returned")
	}
}

var errLost = errors.New("lost the Lease")

// TestAbortDuringDrainStopsAtOnce: a replica that loses its Lease in the
// middle of a graceful drain must stop writing then, not when the drain
// would have ended: the sync in flight is cancelled with Abort's cause, the
// key still queued is never synced, and Run returns. In a synctest bubble,
// so that synctest.Wait can show Run blocked in the drain rather than
// merely not yet returned.
func TestAbortDuringDrainStopsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Options{DrainTimeout: time.Hour})
		f.startInformers()
		first, second := bookKey("first"), bookKey("second")
		started := make(chan struct{})
		var cause atomic.Value
		var synced []cache.ObjectName
		var mu sync.Mutex
		f.c.syncHandler = func(ctx context.Context, k cache.ObjectName) (Result, error) {
			mu.Lock()
			synced = append(synced, k)
			mu.Unlock()
			if k == first {
				close(started)
				<-ctx.Done()
				cause.Store(context.Cause(ctx))
				// Not ctx.Err(): a failed sync goes to HandleError, whose
				// backoff sleeps by a clock shared across tests, not the
				// bubble's.
				return Result{}, nil
			}
			return Result{}, nil
		}
		f.c.queue.Add(first)
		f.c.queue.Add(second)

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- f.c.Run(ctx, 1) }()
		<-started
		cancel() // SIGTERM: the drain begins, and waits for the sync in flight
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Run returned (%v) during the drain with a sync in flight", err)
		default:
		}

		f.c.Abort(errLost)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return within 5s of Abort during a drain")
		}
		if got, _ := cause.Load().(error); !errors.Is(got, errLost) {
			t.Errorf("the sync in flight was cancelled with cause %v, want %v", got, errLost)
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(synced, []cache.ObjectName{first}) {
			t.Errorf("synced %v after Abort, want only %v", synced, first)
		}
	})
}

// TestAbortBeforeRunStartsNoWorker: leadership lost between taking the
// Lease and starting the controller.
func TestAbortBeforeRunStartsNoWorker(t *testing.T) {
	f := newFixture(t, Options{})
	f.startInformers()
	syncs := f.countSyncs()
	f.c.queue.Add(bookKey("queued"))
	f.c.Abort(errLost)
	if err := f.c.Run(context.Background(), 2); err != nil {
		t.Errorf("Run: %v", err)
	}
	if n := syncs.Load(); n != 0 {
		t.Errorf("Run after Abort synced %d keys, want 0", n)
	}
}

// TestAbortReleasesTheQueueOfAControllerNeverRun: New starts the work
// queue's goroutines; a manager that returns before Run must be able to stop
// them.
func TestAbortReleasesTheQueueOfAControllerNeverRun(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	f := newFixture(t, Options{})
	f.c.Abort(errLost)
	goleak.VerifyNone(t, ignore)
}
