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
	"testing"
	"time"

	"ydzs.io/book-controller/internal/poll"
)

// builder hands out st, and counts the builds.
func builder(st *fakeStack, builds *int) func(context.Context) (Stack, error) {
	return func(context.Context) (Stack, error) {
		*builds++
		return st, nil
	}
}

// TestWorkAbortedBeforeItsBuildNeverStarts: a Lease lost while the shard's
// stack is being built leaves no informer running and no controller to
// abort later: the stack is aborted with the loss and stopped at once.
func TestWorkAbortedBeforeItsBuildNeverStarts(t *testing.T) {
	st := newFakeStack()
	loss := errors.New("lost")
	var w *work
	w = &work{shard: Equal(1)[0], build: func(context.Context) (Stack, error) {
		w.Abort(loss) // the elector's goroutine, racing the build
		return st, nil
	}}
	if err := w.Run(context.Background()); err != nil {
		t.Fatalf("Run of an aborted work: %v, want nil", err)
	}
	started, running, stopped := st.state()
	if started || running || !stopped || !errors.Is(st.abortCause, loss) {
		t.Errorf("started %v, running %v, stopped %v, aborted with %v: want only stopped, aborted with the loss",
			started, running, stopped, st.abortCause)
	}
	if _, _, ok := w.cached(); ok || w.synced() {
		t.Error("an aborted work reports a cache")
	}
}

// TestWorkDropsItsCachesWhenItEnds: while the controller runs, the shard's
// cache is what the probes and metrics read; an Abort stops the
// controller, and once Run returns the informers are stopped and no cache
// is left.
func TestWorkDropsItsCachesWhenItEnds(t *testing.T) {
	st := newFakeStack()
	st.synced, st.books, st.configMaps = true, 3, 2
	builds := 0
	w := &work{shard: Equal(1)[0], build: builder(st, &builds)}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	poll.Eventually(t, "the controller to run", 10*time.Millisecond, 10*time.Second, func(context.Context) error {
		_, running, _ := st.state()
		return poll.Done(running, "not running")
	})
	if started, _, _ := st.state(); !started {
		t.Error("the controller runs before its informers started")
	}
	if n, cms, ok := w.cached(); !ok || n != 3 || cms != 2 || !w.synced() {
		t.Errorf("while running: %d Books and %d ConfigMaps cached (ok %v), synced %v; want 3, 2, true, true", n, cms, ok, w.synced())
	}

	w.Abort(errors.New("lost"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after Abort: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Abort did not stop Run")
	}
	if _, _, stopped := st.state(); !stopped {
		t.Error("the informers were not stopped")
	}
	if _, _, ok := w.cached(); ok || w.synced() {
		t.Error("the caches outlive the work")
	}
	if builds != 1 {
		t.Errorf("%d builds, want 1", builds)
	}
}

// TestWorkBuildFailure: a stack that cannot be built is the work's error,
// and leaves nothing behind.
func TestWorkBuildFailure(t *testing.T) {
	bad := errors.New("no scheme")
	w := &work{shard: Equal(1)[0], build: func(context.Context) (Stack, error) { return nil, bad }}
	if err := w.Run(context.Background()); !errors.Is(err, bad) {
		t.Fatalf("Run: %v, want the build's error", err)
	}
	if _, _, ok := w.cached(); ok {
		t.Error("a failed build left a cache")
	}
	w.Abort(errors.New("after the end")) // must not reach a stack
}
