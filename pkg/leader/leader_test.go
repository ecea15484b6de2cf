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

package leader

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"ydzs.io/book-controller/internal/leasetest"
	"ydzs.io/book-controller/internal/poll"
)

const (
	testNamespace = "ns"
	testLease     = "lease"
)

// runFixture is an Elector on client-go's fake clientset. client-go's
// elector runs on the real clock, with timings short enough for a test;
// the fence runs on a fake clock, so that it never closes unless the test
// moves the clock.
type runFixture struct {
	kube    *fake.Clientset
	clock   *clocktesting.FakeClock
	elector *Elector
}

func newRunFixture(t *testing.T, identity string) *runFixture {
	t.Helper()
	f := &runFixture{kube: leasetest.NewClientset(), clock: clocktesting.NewFakeClock(tStart)}
	var err error
	f.elector, err = New(Config{
		Namespace: testNamespace, Name: testLease, Identity: identity,
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
		AfterLoss: "standing by again",
		Refused:   prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"}),
		Clock:     f.clock,
	}, f.kube.CoordinationV1())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// run starts Run in the background; the channel delivers its result.
func (f *runFixture) run(t *testing.T, ctx context.Context, work Work) <-chan error {
	t.Helper()
	ctx = klog.NewContext(ctx, ktesting.NewLogger(t, ktesting.NewConfig()))
	done := make(chan error, 1)
	go func() { done <- f.elector.Run(ctx, work) }()
	return done
}

func (f *runFixture) lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	return leasetest.Get(t, f.kube, testNamespace, testLease)
}

// testWork records what the fence allowed at each moment of its life.
type testWork struct {
	fence   *Fence
	started chan struct{}
	// fail, if set, is what Run returns at once.
	fail error
	// stopped is closed by Abort.
	stopped   chan struct{}
	abortOnce sync.Once

	mu sync.Mutex
	// leadingInDrain: whether writes were admitted once ctx had ended.
	leadingInDrain bool
	// abortCause, and the fence's answer to a write at the moment of the
	// Abort.
	abortCause, writeAtAbort error
	returned                 bool
}

func newTestWork(fence *Fence) *testWork {
	return &testWork{fence: fence, started: make(chan struct{}), stopped: make(chan struct{})}
}

func (w *testWork) Run(ctx context.Context) error {
	close(w.started)
	if w.fail != nil {
		return w.fail
	}
	select {
	case <-ctx.Done():
		w.mu.Lock()
		w.leadingInDrain = w.fence.Leading()
		w.mu.Unlock()
	case <-w.stopped:
	}
	w.mu.Lock()
	w.returned = true
	w.mu.Unlock()
	return nil
}

func (w *testWork) Abort(cause error) {
	_, err := w.fence.admit()
	if err == nil {
		w.fence.done()
	}
	w.mu.Lock()
	if w.abortCause == nil {
		w.abortCause, w.writeAtAbort = cause, err
	}
	w.mu.Unlock()
	w.abortOnce.Do(func() { close(w.stopped) })
}

func waitFor(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func result(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// TestRunReleasesTheLeaseOnlyAfterTheDrain: on a shutdown the work drains
// with the fence still open; the Lease is released after the work has
// returned and the fence has closed, so that a successor cannot write
// while we still do.
func TestRunReleasesTheLeaseOnlyAfterTheDrain(t *testing.T) {
	f := newRunFixture(t, "me")
	work := newTestWork(f.elector.Fence())
	var mu sync.Mutex
	var released, workDoneAtRelease, leadingAtRelease bool
	f.kube.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			work.mu.Lock()
			returned := work.returned
			work.mu.Unlock()
			mu.Lock()
			released, workDoneAtRelease, leadingAtRelease = true, returned, f.elector.Fence().Leading()
			mu.Unlock()
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := f.run(t, ctx, work)
	waitFor(t, "the work to start", work.started)
	if h := f.lease(t).Spec.HolderIdentity; h == nil || *h != "me" {
		t.Fatalf("the work started with the Lease held by %v", h)
	}
	cancel()
	if err := result(t, done); err != nil {
		t.Fatalf("Run after a shutdown: %v, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	switch {
	case !released:
		t.Error("the Lease was not released")
	case !workDoneAtRelease:
		t.Error("the Lease was released before the work had drained")
	case leadingAtRelease:
		t.Error("the Lease was released with the fence still open")
	}
	if !work.leadingInDrain {
		t.Error("writes were refused during the drain: the Lease was still held")
	}
	if work.abortCause != nil {
		t.Errorf("a graceful stop aborted the work: %v", work.abortCause)
	}
	if l := f.lease(t); l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != 1 {
		t.Errorf("released Lease: %+v, want a one-second duration, so standbys take it at once", l.Spec)
	}
}

// TestRunLostLeaseClosesTheFenceBeforeTheWorkStops: once the Lease shows
// another holder, writes are refused by the time the work is told to
// stop, Run reports the loss, and the Lease (someone else's) is left alone.
func TestRunLostLeaseClosesTheFenceBeforeTheWorkStops(t *testing.T) {
	f := newRunFixture(t, "me")
	work := newTestWork(f.elector.Fence())
	done := f.run(t, context.Background(), work)
	waitFor(t, "the work to start", work.started)
	leasetest.Take(t, f.kube, testNamespace, testLease, "thief", 2*time.Second)

	err := result(t, done)
	if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), `held by "thief"`) || !strings.HasSuffix(err.Error(), "standing by again") {
		t.Fatalf("Run after the Lease was taken: %v, want ErrLost naming the thief and ending with AfterLoss", err)
	}
	work.mu.Lock()
	defer work.mu.Unlock()
	if !errors.Is(work.abortCause, ErrLost) {
		t.Errorf("the work was stopped with %v, want the loss", work.abortCause)
	}
	if !errors.Is(work.writeAtAbort, ErrWriteFenced) {
		t.Errorf("a write at the moment the work was stopped: %v, want it refused", work.writeAtAbort)
	}
	if !work.returned {
		t.Error("Run returned before the work did")
	}
	if h := f.lease(t).Spec.HolderIdentity; h == nil || *h != "thief" {
		t.Errorf("after a loss the Lease is held by %v, want it left to the thief", h)
	}
}

// TestRunLosesAtTheRenewDeadline: a leader whose renewals stop counting
// (here: the fence's clock jumps past the renew deadline) stops writing
// and stops its work although its elector has noticed nothing.
func TestRunLosesAtTheRenewDeadline(t *testing.T) {
	f := newRunFixture(t, "me")
	work := newTestWork(f.elector.Fence())
	done := f.run(t, context.Background(), work)
	waitFor(t, "the work to start", work.started)
	f.clock.Step(1500*time.Millisecond + time.Millisecond)

	if err := result(t, done); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "renew deadline") {
		t.Fatalf("Run past the renew deadline: %v, want ErrLost naming the deadline", err)
	}
	work.mu.Lock()
	defer work.mu.Unlock()
	if !errors.Is(work.writeAtAbort, ErrWriteFenced) {
		t.Errorf("a write at the moment the work was stopped: %v, want it refused", work.writeAtAbort)
	}
	if err := f.elector.Fence().Healthy(); err == nil {
		t.Error("healthy after the loss, want /healthz failing until the exit")
	}
}

// TestRunStandsByWhileAnotherHolds: the work never starts, nothing is
// written, and a shutdown leaves the other holder's Lease as it was. The
// elector reading the Lease a third time is the marker: it decides on each
// read before the next, so by then it has twice found the Lease held and
// twice had the chance to (wrongly) take it.
func TestRunStandsByWhileAnotherHolds(t *testing.T) {
	f := newRunFixture(t, "me")
	var reads atomic.Int32
	f.kube.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		reads.Add(1)
		return false, nil, nil
	})
	now := metav1.NewMicroTime(time.Now())
	_, err := f.kube.CoordinationV1().Leases(testNamespace).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("other"), LeaseDurationSeconds: ptr.To[int32](60),
			AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ours := len(f.kube.Actions()) // the test's own create
	work := newTestWork(f.elector.Fence())
	ctx, cancel := context.WithCancel(context.Background())
	done := f.run(t, ctx, work)
	poll.Eventually(t, "the elector to read the Lease three times", 10*time.Millisecond, 10*time.Second, func(context.Context) error {
		n := reads.Load()
		return poll.Done(n >= 3, "%d reads", n)
	})
	for _, a := range f.kube.Actions()[ours:] {
		if a.GetVerb() != "get" {
			t.Errorf("the standby wrote the Lease held by another: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	select {
	case <-work.started:
		t.Fatal("the work started while another replica holds the Lease")
	default:
	}
	if _, err := f.elector.Fence().admit(); !errors.Is(err, ErrWriteFenced) {
		t.Errorf("a write while standing by: %v, want it refused", err)
	}
	cancel()
	if err := result(t, done); err != nil {
		t.Fatalf("Run after a shutdown while standing by: %v, want nil", err)
	}
	if l := f.lease(t); *l.Spec.HolderIdentity != "other" || *l.Spec.LeaseDurationSeconds != 60 {
		t.Errorf("the other holder's Lease changed: %+v", l.Spec)
	}
}

// TestRunReturnsTheWorkErrorAndReleases: work that fails ends Run with
// its error, and the Lease is given up for another replica to take.
func TestRunReturnsTheWorkErrorAndReleases(t *testing.T) {
	f := newRunFixture(t, "me")
	work := newTestWork(f.elector.Fence())
	work.fail = errors.New("caches did not sync")
	if err := result(t, f.run(t, context.Background(), work)); err != work.fail {
		t.Fatalf("Run: %v, want the work's error", err)
	}
	if h := f.lease(t).Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("after the work failed the Lease is held by %q, want it released", *h)
	}
	if _, err := f.elector.Fence().admit(); !errors.Is(err, ErrWriteFenced) {
		t.Errorf("a write after Run returned: %v, want it refused", err)
	}
}
