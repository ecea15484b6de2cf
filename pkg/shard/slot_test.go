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
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"ydzs.io/book-controller/internal/leasetest"
	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/leader"
)

const (
	leaseNS = "ns"
	leaseID = "books"
)

// fakeStack is a shard's stack that records what was done to it.
type fakeStack struct {
	// runErr, if set, is what Run returns at once: the caches failed to
	// sync, say.
	runErr error
	// writes, if set, is a client whose writes go through the shard's
	// fence; Abort tries one.
	writes kubernetes.Interface

	aborted   chan struct{} // closed by the first Abort
	abortOnce sync.Once

	mu                        sync.Mutex
	started, running, stopped bool
	abortCause, writeAtAbort  error
	synced                    bool
	books, configMaps         int
}

func newFakeStack() *fakeStack { return &fakeStack{aborted: make(chan struct{})} }

func (s *fakeStack) Start() { s.mu.Lock(); s.started = true; s.mu.Unlock() }

func (s *fakeStack) Run(ctx context.Context) error {
	s.mu.Lock()
	s.running = true
	s.mu.Unlock()
	if s.runErr != nil {
		return s.runErr
	}
	select {
	case <-ctx.Done():
	case <-s.aborted:
	}
	return nil
}

func (s *fakeStack) Abort(cause error) {
	var err error
	if s.writes != nil {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
		_, err = s.writes.CoreV1().ConfigMaps("team").Create(context.Background(), cm, metav1.CreateOptions{})
	}
	s.mu.Lock()
	if s.abortCause == nil {
		s.abortCause, s.writeAtAbort = cause, err
	}
	s.mu.Unlock()
	s.abortOnce.Do(func() { close(s.aborted) })
}

func (s *fakeStack) HasSynced() bool       { s.mu.Lock(); defer s.mu.Unlock(); return s.synced }
func (s *fakeStack) CachedBooks() int      { s.mu.Lock(); defer s.mu.Unlock(); return s.books }
func (s *fakeStack) CachedConfigMaps() int { s.mu.Lock(); defer s.mu.Unlock(); return s.configMaps }
func (s *fakeStack) Stop()                 { s.mu.Lock(); s.stopped = true; s.mu.Unlock() }

func (s *fakeStack) state() (started, running, stopped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started, s.running, s.stopped
}

// replicaFixture is a Replica of one shard on a fake clientset, whose
// Build hands out the stacks the test prepared, in order.
type replicaFixture struct {
	kube    *fake.Clientset
	replica *Replica
	stacks  chan *fakeStack
	// fences receives the fence of each stack built.
	fences chan *leader.Fence
	// api is where the stacks' fenced writes go; posts counts them.
	api   *httptest.Server
	posts atomic.Int32
}

func newReplicaFixture(t *testing.T) *replicaFixture {
	t.Helper()
	f := &replicaFixture{kube: leasetest.NewClientset(), stacks: make(chan *fakeStack, 4), fences: make(chan *leader.Fence, 4)}
	f.api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.posts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"}}`))
	}))
	t.Cleanup(f.api.Close)
	f.replica = NewReplica(Config{
		Shards: Equal(1),
		Lease: leader.Config{Namespace: leaseNS, Name: leaseID, Identity: "me",
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
			Refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"}),
			Clock:   clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))},
		Leases: f.kube.CoordinationV1(),
		Build:  f.build,
	})
	return f
}

func (f *replicaFixture) build(_ context.Context, s Shard, fence *leader.Fence) (Stack, error) {
	select {
	case st := <-f.stacks:
		cfg := fence.Wrap(&rest.Config{Host: f.api.URL}, connrotation.NewDialer((&net.Dialer{}).DialContext))
		st.writes = kubernetes.NewForConfigOrDie(cfg)
		f.fences <- fence
		return st, nil
	default:
		return nil, errors.New("the test prepared no further stack")
	}
}

func (f *replicaFixture) run(t *testing.T, ctx context.Context) <-chan error {
	t.Helper()
	ctx = klog.NewContext(ctx, ktesting.NewLogger(t, ktesting.NewConfig()))
	done := make(chan error, 1)
	go func() { done <- f.replica.Run(ctx) }()
	return done
}

func (f *replicaFixture) status(t *testing.T) Status {
	t.Helper()
	st := f.replica.Status()
	if len(st) != 1 {
		t.Fatalf("Status of a replica with one shard: %+v", st)
	}
	return st[0]
}

func (f *replicaFixture) waitRunning(t *testing.T, st *fakeStack) {
	t.Helper()
	poll.Eventually(t, "the shard's controller to run", 10*time.Millisecond, 10*time.Second, func(context.Context) error {
		_, running, _ := st.state()
		return poll.Done(running, "not running")
	})
}

func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Replica.Run did not return")
		return nil
	}
}

// TestSlotThatFailsToSyncReleasesItsLease: a shard whose controller fails
// gives its Lease up for another replica and leaves nothing running, and
// the replica exits with the shard's error.
func TestSlotThatFailsToSyncReleasesItsLease(t *testing.T) {
	f := newReplicaFixture(t)
	st := newFakeStack()
	st.runErr = errors.New("caches did not sync")
	f.stacks <- st

	err := wait(t, f.run(t, context.Background()))
	if err == nil || !strings.Contains(err.Error(), "shard 0: caches did not sync") {
		t.Fatalf("Replica.Run: %v, want the shard's error", err)
	}
	if h := leasetest.Holder(t, f.kube, leaseNS, LeaseName(leaseID, 0)); h != "" {
		t.Errorf("the failed shard's Lease is held by %q, want it released", h)
	}
	if _, _, stopped := st.state(); !stopped {
		t.Error("the failed shard's informers were not stopped")
	}
	if s := f.status(t); s.Held || s.Cached {
		t.Errorf("status after the failure: %+v, want neither held nor cached", s)
	}
	if n := len(f.replica.slots[0].turn.gate.held); n != 0 {
		t.Errorf("the gate still counts %d shard(s) held", n)
	}
}

// TestShardHandedOverStopsItsInformersAndWrites: a shard whose Lease
// another replica takes refuses writes by the time its controller is
// stopped, drops its caches, and its slot stands by for it again.
func TestShardHandedOverStopsItsInformersAndWrites(t *testing.T) {
	f := newReplicaFixture(t)
	st := newFakeStack()
	f.stacks <- st
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := f.run(t, ctx)
	f.waitRunning(t, st)
	fence := <-f.fences

	if s := f.status(t); !s.Held || !s.Cached || s.Lease != LeaseName(leaseID, 0) {
		t.Errorf("status while holding the shard: %+v", s)
	}
	if f.replica.Synced() {
		t.Error("ready while the held shard's caches have not synced")
	}
	st.mu.Lock()
	st.synced, st.books = true, 7
	st.mu.Unlock()
	if s := f.status(t); !f.replica.Synced() || s.CachedBooks != 7 {
		t.Errorf("synced %v, status %+v: want ready, 7 Books cached", f.replica.Synced(), s)
	}
	if _, err := st.writes.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a write while holding the shard: %v", err)
	}

	leasetest.Take(t, f.kube, leaseNS, LeaseName(leaseID, 0), "thief", time.Minute)
	poll.Eventually(t, "the handed-over shard's caches dropped, its slot standing by again", 10*time.Millisecond, 10*time.Second, func(context.Context) error {
		_, _, stopped := st.state()
		s := f.status(t)
		next, _ := f.replica.slots[0].current()
		return poll.Done(stopped && !s.Held && !s.Cached && next != nil && next != fence,
			"stopped %v, status %+v, a new attempt %v", stopped, s, next != nil && next != fence)
	})
	st.mu.Lock()
	if !errors.Is(st.abortCause, leader.ErrLost) || !errors.Is(st.writeAtAbort, leader.ErrWriteFenced) {
		t.Errorf("the controller was stopped with %v, and a write then got %v: want the loss, and the write refused", st.abortCause, st.writeAtAbort)
	}
	st.mu.Unlock()
	if fence.Leading() {
		t.Error("the handed-over shard's fence still admits writes")
	}
	if n := f.posts.Load(); n != 1 {
		t.Errorf("%d writes reached the API server, want only the one made while holding the shard", n)
	}
	if !f.replica.Synced() || f.replica.Healthy() != nil {
		t.Errorf("a replica that lost its shard: synced %v, healthy %v; want a ready, healthy spare", f.replica.Synced(), f.replica.Healthy())
	}

	cancel()
	if err := wait(t, done); err != nil {
		t.Fatalf("Replica.Run after a shutdown: %v, want nil", err)
	}
	if h := leasetest.Holder(t, f.kube, leaseNS, LeaseName(leaseID, 0)); h != "thief" {
		t.Errorf("the shard's Lease is held by %q, want it left to the thief", h)
	}
}
