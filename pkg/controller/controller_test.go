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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// The fake clients and the queue answer at once: poll every millisecond,
// and give up after five seconds, far beyond any wait here on a loaded
// machine (the longest is a rate limiter's first backoff, 5 ms).
const pollInterval, pollTimeout = time.Millisecond, 5 * time.Second

// queueLength is a check that the queue holds n keys.
func queueLength(q interface{ Len() int }, n int) poll.Check {
	return func(context.Context) error {
		l := q.Len()
		return poll.Done(l == n, "%d keys queued", l)
	}
}

func TestProcessNextWorkItemSuccessForgetsKey(t *testing.T) {
	f := newFixture(t, Options{})
	key := bookKey("demo")
	var got []cache.ObjectName
	f.c.syncHandler = func(_ context.Context, k cache.ObjectName) (Result, error) {
		got = append(got, k)
		return Result{}, nil
	}
	// An earlier failure left some backoff behind.
	f.c.queue.AddRateLimited(key)
	if n := f.c.queue.NumRequeues(key); n != 1 {
		t.Fatalf("precondition: NumRequeues %d, want 1", n)
	}
	poll.Eventually(t, "the rate-limited key", pollInterval, pollTimeout, queueLength(f.c.queue, 1))

	if !f.c.processNextWorkItem(t.Context(), 0) {
		t.Fatal("processNextWorkItem returned false on a live queue")
	}
	if !slices.Equal(got, []cache.ObjectName{key}) {
		t.Errorf("syncHandler calls: got %v, want [%v]", got, key)
	}
	if n := f.c.queue.NumRequeues(key); n != 0 {
		t.Errorf("NumRequeues after success: got %d, want 0 (Forget)", n)
	}
	if n := f.c.queue.Len(); n != 0 {
		t.Errorf("queue length after success: got %d, want 0", n)
	}
}

func TestProcessNextWorkItemRequeuesFailures(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: webappv2.GroupName, Resource: "books"}, "demo", errors.New("stale"))
	tests := []struct {
		name string
		sync func(context.Context, cache.ObjectName) (Result, error)
	}{
		{"error", func(context.Context, cache.ObjectName) (Result, error) { return Result{}, errors.New("boom") }},
		{"409 Conflict", func(context.Context, cache.ObjectName) (Result, error) { return Result{}, conflict }},
		{"wrapped 409 Conflict", func(context.Context, cache.ObjectName) (Result, error) {
			return Result{}, errors.Join(errors.New("updating status"), conflict)
		}},
		{"an error beats RequeueAfter", func(context.Context, cache.ObjectName) (Result, error) {
			return Result{RequeueAfter: time.Hour}, errors.New("boom")
		}},
		{"panic", func(context.Context, cache.ObjectName) (Result, error) { panic("bad object") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			key := bookKey("demo")
			f.c.syncHandler = tt.sync
			f.c.queue.Add(key)

			if !f.c.processNextWorkItem(t.Context(), 0) {
				t.Fatal("processNextWorkItem returned false; the worker would stop")
			}
			if n := f.c.queue.NumRequeues(key); n != 1 {
				t.Errorf("NumRequeues: got %d, want 1", n)
			}
			// Rate-limited, not immediate: the key comes back after the backoff.
			poll.Eventually(t, "the key to be requeued", pollInterval, pollTimeout, queueLength(f.c.queue, 1))
			if k, _ := f.c.queue.Get(); k != key {
				t.Errorf("requeued key: got %v, want %v", k, key)
			}
		})
	}
}

// TestWorkerSurvivesPanic runs a real worker: the first sync panics, the
// retry succeeds, and the worker keeps going until the queue shuts down.
func TestWorkerSurvivesPanic(t *testing.T) {
	f := newFixture(t, Options{})
	key := bookKey("demo")
	var calls atomic.Int32
	f.c.syncHandler = func(_ context.Context, k cache.ObjectName) (Result, error) {
		if calls.Add(1) == 1 {
			panic("first sync panics")
		}
		return Result{}, nil
	}
	f.c.queue.Add(key)

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		f.c.runWorker(t.Context(), 0)
	}()

	poll.Eventually(t, "the retry after the panic", pollInterval, pollTimeout, func(context.Context) error {
		n := calls.Load()
		return poll.Done(n == 2, "%d syncs", n)
	})
	poll.Eventually(t, "the successful retry to forget the key", pollInterval, pollTimeout, func(context.Context) error {
		n := f.c.queue.NumRequeues(key)
		return poll.Done(n == 0, "NumRequeues %d", n)
	})
	f.c.queue.ShutDown()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("worker did not stop after the queue shut down")
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("syncHandler calls: got %d, want 2", n)
	}
}

func TestProcessNextWorkItemAfterShutdown(t *testing.T) {
	f := newFixture(t, Options{})
	f.c.queue.ShutDown()
	if f.c.processNextWorkItem(t.Context(), 0) {
		t.Error("processNextWorkItem returned true on a shut-down queue")
	}
}

func TestRunRejectsTooFewWorkers(t *testing.T) {
	f := newFixture(t, Options{})
	for _, workers := range []int{0, -1} {
		if err := f.c.Run(t.Context(), workers); err == nil {
			t.Errorf("Run with %d workers: got nil, want an error", workers)
		}
	}
}

func TestRunReturnsWhenCancelledBeforeCachesSync(t *testing.T) {
	f := newFixture(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // informers never started, so the caches can never sync
	if err := f.c.Run(ctx, 1); err != nil {
		t.Errorf("Run: got %v, want nil", err)
	}
}

// startRun starts the informers and Run; the returned function cancels Run's
// context and waits for Run to return, and returns Run's error, or an error
// of its own if Run takes more than five seconds.
func (f *fixture) startRun(opts runOpts) (stop func() error) {
	f.t.Helper()
	f.runInformers()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.c.Run(ctx, opts.workers) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				err = errors.New("run did not return within 5s of its context ending")
			}
		})
		return err
	}
	f.t.Cleanup(func() {
		if err := stop(); err != nil {
			f.t.Error(err)
		}
	})
	return stop
}

type runOpts struct{ workers int }

func TestRunReconcilesBookAndStopsCleanly(t *testing.T) {
	f := newFixture(t, Options{})
	book := newBook("demo", 1, "Run", 12)
	book.ResourceVersion = ""
	if _, err := f.bookClient.WebappV2().Books(testNamespace).Create(t.Context(), book, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := f.startRun(runOpts{workers: 2})

	poll.Eventually(t, "the Book to become Ready", pollInterval, pollTimeout, func(ctx context.Context) error {
		b, err := f.bookClient.WebappV2().Books(testNamespace).Get(ctx, "demo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return poll.Done(len(b.Status.Conditions) == 1 && b.Status.Conditions[0].Status == metav1.ConditionTrue &&
			b.Status.Conditions[0].ObservedGeneration == b.Generation && b.Status.ObservedGeneration == b.Generation,
			"generation %d, observedGeneration %d, conditions %+v", b.Generation, b.Status.ObservedGeneration, b.Status.Conditions)
	})
	// The status write comes back as a Book update event and the
	// ConfigMap's add event enqueues the Book too; let those settle.
	poll.Eventually(t, "the queue to empty", pollInterval, pollTimeout, queueLength(f.c.queue, 0))

	if err := stop(); err != nil {
		t.Errorf("Run: got %v, want nil", err)
	}
	if !f.c.queue.ShuttingDown() {
		t.Error("queue not shut down after Run returned")
	}

	f.expectConfigMapMatches(book)
	f.expectReady("demo", metav1.ConditionTrue, ReasonConfigMapReady)
	events := f.events()
	if len(events) != 1 || events[0] != eventCreated+"demo" {
		t.Errorf("events: got %q, want exactly one %q", events, eventCreated+"demo")
	}
}

// TestRunDrainsQueueOnCancel: when the context ends, the key being synced
// finishes and the keys already queued are still processed before Run
// returns. In a synctest bubble: synctest.Wait returns once every goroutine
// of the test is blocked, so a Run that would return with the sync in
// flight has returned by then.
func TestRunDrainsQueueOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Options{})
		first, second := bookKey("first"), bookKey("second")
		started, release := make(chan struct{}), make(chan struct{})
		var mu sync.Mutex
		var processed []cache.ObjectName
		f.c.syncHandler = func(ctx context.Context, k cache.ObjectName) (Result, error) {
			if k == first {
				close(started)
				<-release
			}
			if ctx.Err() != nil {
				t.Errorf("sync of %v saw a cancelled context during the drain", k)
			}
			mu.Lock()
			processed = append(processed, k)
			mu.Unlock()
			return Result{}, nil
		}
		f.c.queue.Add(first)
		f.c.queue.Add(second)
		stopped := make(chan error, 1)
		stop := f.startRun(runOpts{workers: 1})

		<-started
		go func() { stopped <- stop() }()
		synctest.Wait() // Run has gone as far as it can
		select {
		case <-stopped:
			t.Fatal("Run returned while a sync was still in flight")
		default:
		}
		close(release)
		if err := <-stopped; err != nil {
			t.Errorf("Run: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(processed, []cache.ObjectName{first, second}) {
			t.Errorf("processed: got %v, want [%v %v]", processed, first, second)
		}
	})
}

// TestRunDrainTimeoutCancelsInFlightWork: a sync that does not finish within
// the drain timeout has its context cancelled, and Run still returns.
func TestRunDrainTimeoutCancelsInFlightWork(t *testing.T) {
	f := newFixture(t, Options{DrainTimeout: 10 * time.Millisecond})
	started := make(chan struct{})
	var startOnce sync.Once
	var sawCancel atomic.Bool
	f.c.syncHandler = func(ctx context.Context, _ cache.ObjectName) (Result, error) {
		startOnce.Do(func() { close(started) })
		<-ctx.Done()
		sawCancel.Store(true)
		return Result{}, ctx.Err()
	}
	f.c.queue.Add(bookKey("stuck"))
	stop := f.startRun(runOpts{workers: 1})

	<-started
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if !sawCancel.Load() {
		t.Error("the in-flight sync's context was not cancelled after the drain timeout")
	}
}

// TestProcessNextWorkItemRequeueAfter: a sync that asks to be looked at
// again later is forgotten (no backoff kept) and comes back after the delay,
// not at once.
func TestProcessNextWorkItemRequeueAfter(t *testing.T) {
	f := newFixture(t, Options{})
	key := bookKey("demo")
	f.c.syncHandler = func(context.Context, cache.ObjectName) (Result, error) {
		return Result{RequeueAfter: 50 * time.Millisecond}, nil
	}
	f.c.queue.AddRateLimited(key) // an earlier failure's backoff
	poll.Eventually(t, "the rate-limited key", pollInterval, pollTimeout, queueLength(f.c.queue, 1))

	if !f.c.processNextWorkItem(t.Context(), 0) {
		t.Fatal("processNextWorkItem returned false on a live queue")
	}
	if n := f.c.queue.NumRequeues(key); n != 0 {
		t.Errorf("NumRequeues: got %d, want 0 (Forget)", n)
	}
	if n := f.c.queue.Len(); n != 0 {
		t.Errorf("queue length right after the sync: got %d, want 0 (the key waits)", n)
	}
	poll.Eventually(t, "the key after RequeueAfter", pollInterval, pollTimeout, queueLength(f.c.queue, 1))
}
