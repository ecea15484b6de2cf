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
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/connrotation"
	clocktesting "k8s.io/utils/clock/testing"

	"ydzs.io/book-controller/internal/poll"
)

const testRenewDeadline = 10 * time.Second

var tStart = time.Date(2026, time.January, 2, 3, 4, 5, 0, time.UTC)

type fenceFixture struct {
	fence   *Fence
	clock   *clocktesting.FakeClock
	refused prometheus.Counter
}

func newFenceFixture(t *testing.T) *fenceFixture {
	t.Helper()
	f := &fenceFixture{
		clock:   clocktesting.NewFakeClock(tStart),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"}),
	}
	f.fence = newFence(testRenewDeadline, f.clock, f.refused)
	return f
}

// admitted admits one write and reports how long it may take, failing the
// test if the fence refuses it.
func (f *fenceFixture) admitted(t *testing.T) time.Duration {
	t.Helper()
	left, err := f.fence.admit()
	if err != nil {
		t.Fatalf("write refused: %v", err)
	}
	f.fence.done()
	return left
}

// refusedWith checks that a write is refused with an error containing want.
func (f *fenceFixture) refusedWith(t *testing.T, want string) {
	t.Helper()
	before := testutil.ToFloat64(f.refused)
	_, err := f.fence.admit()
	if !errors.Is(err, ErrWriteFenced) || !strings.Contains(err.Error(), want) {
		t.Fatalf("admit: got %v, want ErrWriteFenced saying %q", err, want)
	}
	if got := testutil.ToFloat64(f.refused); got != before+1 {
		t.Errorf("book_controller_writes_fenced_total went from %v to %v, want +1", before, got)
	}
}

func waitLost(t *testing.T, f *Fence) {
	t.Helper()
	select {
	case <-f.lost:
	case <-time.After(5 * time.Second):
		t.Fatal("leadership not reported lost")
	}
}

func TestFenceRefusesWritesBeforeTheLeaseIsHeld(t *testing.T) {
	f := newFenceFixture(t)
	f.refusedWith(t, "has not acquired the Lease")
	if f.fence.Leading() {
		t.Error("a standby reports leading")
	}
	if err := f.fence.Healthy(); err != nil {
		t.Errorf("a standby is unhealthy: %v", err)
	}
}

// TestFenceClosesAtTheRenewDeadlineOfTheLastRenewalSent: the window is
// measured from when the renewal was sent, not from when it was answered.
func TestFenceClosesAtTheRenewDeadlineOfTheLastRenewalSent(t *testing.T) {
	f := newFenceFixture(t)
	sent := f.clock.Now()
	f.clock.Step(3 * time.Second) // the renewal took 3 s to be answered
	f.fence.renewed(sent)
	if left := f.admitted(t); left != testRenewDeadline-3*time.Second {
		t.Errorf("an admitted write may take %v, want %v (the deadline of the renewal sent 3 s ago)", left, testRenewDeadline-3*time.Second)
	}
	if !f.fence.Leading() {
		t.Error("not leading after acquiring")
	}

	f.clock.Step(testRenewDeadline - 3*time.Second - time.Millisecond)
	if left := f.admitted(t); left != time.Millisecond {
		t.Errorf("a write 1 ms before the deadline may take %v, want 1ms", left)
	}
	select {
	case <-f.fence.lost:
		t.Fatal("lost before the deadline")
	default:
	}

	f.clock.Step(time.Millisecond)
	waitLost(t, f.fence)
	f.refusedWith(t, "not renewed within the 10s renew deadline")
	if err := f.fence.Healthy(); err == nil || !strings.Contains(err.Error(), "leadership lost") {
		t.Errorf("healthy after the loss: %v, want an error", err)
	}
	if f.fence.Leading() {
		t.Error("leading after the loss")
	}

	// Lost for good: a late answer to a renewal reopens nothing.
	f.fence.renewed(f.clock.Now())
	f.refusedWith(t, "renew deadline")
}

func TestFenceRenewalsKeepItOpen(t *testing.T) {
	f := newFenceFixture(t)
	for range 10 {
		f.fence.renewed(f.clock.Now())
		f.clock.Step(2 * time.Second)
		f.admitted(t)
	}
	// A renewal answered out of order (sent earlier than the latest one)
	// does not shorten the window.
	f.fence.renewed(f.clock.Now().Add(-5 * time.Second))
	if left := f.admitted(t); left != testRenewDeadline-2*time.Second {
		t.Errorf("after an out-of-order renewal a write may take %v, want %v", left, testRenewDeadline-2*time.Second)
	}
}

func TestFenceClosesAtOnceWhenTheLeaseIsTaken(t *testing.T) {
	f := newFenceFixture(t)
	f.fence.taken("other") // standing by: someone else leads, nothing to lose
	select {
	case <-f.fence.lost:
		t.Fatal("a standby lost leadership on seeing the leader")
	default:
	}
	f.fence.renewed(f.clock.Now())
	f.fence.taken("thief")
	waitLost(t, f.fence)
	f.refusedWith(t, `the Lease is held by "thief" now`)
}

// TestFenceStepDownWaitsForTheWritesInFlight: the Lease is released only
// after the last write has been answered. It runs in a synctest bubble:
// synctest.Wait returns once every goroutine of the test is blocked, so a
// stepDown that would return, or an expiry that would fire, has done so
// by then.
func TestFenceStepDownWaitsForTheWritesInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFenceFixture(t)
		f.fence.renewed(f.clock.Now())
		if _, err := f.fence.admit(); err != nil {
			t.Fatal(err)
		}
		stepped := make(chan bool)
		go func() { stepped <- f.fence.stepDown(context.Background()) }()
		synctest.Wait()
		select {
		case <-stepped:
			t.Fatal("stepDown returned with a write in flight")
		default:
		}
		f.refusedWith(t, "shutting down")
		f.fence.done()
		if ok := <-stepped; !ok {
			t.Error("stepDown reported a loss")
		}
		// Stepped down: the deadline passing or the Lease moving is no loss.
		f.fence.taken("next")
		f.clock.Step(2 * testRenewDeadline)
		synctest.Wait() // a (wrong) expiry has run
		select {
		case <-f.fence.lost:
			t.Fatal("lost after stepping down")
		default:
		}
		if f.fence.stepDown(context.Background()) != true {
			t.Error("a second stepDown reported a loss")
		}
	})
}

func TestFenceStepDownAfterALossReportsIt(t *testing.T) {
	f := newFenceFixture(t)
	f.fence.renewed(f.clock.Now())
	f.fence.taken("thief")
	if f.fence.stepDown(context.Background()) {
		t.Error("stepDown after a loss reported a clean step-down")
	}
}

// TestFencedTransport drives a real client through the fence against a
// server that records what reaches it.
func TestFencedTransport(t *testing.T) {
	var posts, gets atomic.Int32
	hold := make(chan struct{})
	defer close(hold)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			gets.Add(1)
			_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"}}`))
			return
		}
		posts.Add(1)
		if body, _ := io.ReadAll(r.Body); strings.Contains(string(body), "hang") {
			select {
			case <-hold:
			case <-r.Context().Done():
			}
			return
		}
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"}}`))
	}))
	defer srv.Close()

	f := newFenceFixture(t)
	conns := connrotation.NewDialer((&net.Dialer{}).DialContext)
	cfg := f.fence.Wrap(&rest.Config{Host: srv.URL}, conns)
	client := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps("ns")
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}

	// Standing by: reads pass, writes never reach the server.
	if _, err := client.Get(ctx, "x", metav1.GetOptions{}); err != nil {
		t.Fatalf("a read while standing by: %v", err)
	}
	if _, err := client.Create(ctx, cm, metav1.CreateOptions{}); !errors.Is(err, ErrWriteFenced) {
		t.Fatalf("a write while standing by: got %v, want ErrWriteFenced", err)
	}
	if n := posts.Load(); n != 0 {
		t.Fatalf("%d writes reached the server from a standby", n)
	}

	// Leading: writes pass, each with a deadline at the fence's.
	f.fence.renewed(f.clock.Now())
	if _, err := client.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a write while leading: %v", err)
	}
	f.clock.Step(testRenewDeadline - 200*time.Millisecond)
	start := time.Now()
	_, err := client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hang"}}, metav1.CreateOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a write the server never answers: got %v, want its context's deadline", err)
	}
	// Far above the 200 ms deadline; a hang would reach the test timeout.
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the unanswered write took %v to fail, want about 200ms", d)
	}

	// Lost: writes refused, and the connections the writes used closed.
	inFlight := make(chan error, 1)
	f.clock.Step(-testRenewDeadline) // back inside the window, for one more write
	go func() {
		_, err := client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hang"}}, metav1.CreateOptions{})
		inFlight <- err
	}()
	poll.Eventually(t, "the hanging write to reach the server", 5*time.Millisecond, 30*time.Second, func(context.Context) error {
		n := posts.Load()
		return poll.Done(n >= 3, "%d writes reached the server", n)
	})
	f.fence.taken("thief")
	select {
	case err := <-inFlight:
		if err == nil {
			t.Error("the write in flight at the loss succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the write in flight at the loss still hangs: its connection was not closed")
	}
	if _, err := client.Create(ctx, cm, metav1.CreateOptions{}); !errors.Is(err, ErrWriteFenced) {
		t.Errorf("a write after the loss: got %v, want ErrWriteFenced", err)
	}
	if n := posts.Load(); n != 3 {
		t.Errorf("%d writes reached the server, want 3", n)
	}
	if _, err := client.Get(ctx, "x", metav1.GetOptions{}); err != nil {
		t.Errorf("a read after the loss: %v", err)
	}
}

// fakeLock is a resourcelock.Interface whose calls take the time the test
// says, on the fake clock.
type fakeLock struct {
	clock    *clocktesting.FakeClock
	identity string
	record   resourcelock.LeaderElectionRecord
	latency  time.Duration
	err      error
}

func (l *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.clock.Step(l.latency)
	rec := l.record
	return &rec, nil, l.err
}

func (l *fakeLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.Update(ctx, rec)
}

func (l *fakeLock) Update(_ context.Context, rec resourcelock.LeaderElectionRecord) error {
	l.clock.Step(l.latency)
	if l.err != nil {
		return l.err
	}
	l.record = rec
	return nil
}

func (l *fakeLock) RecordEvent(string)                    {}
func (l *fakeLock) Identity() string                      { return l.identity }
func (l *fakeLock) Describe() string                      { return "fake" }
func (l *fakeLock) setHolder(h string) *fakeLock          { l.record.HolderIdentity = h; return l }
func (l *fakeLock) withLatency(d time.Duration) *fakeLock { l.latency = d; return l }

// renewal is the record the elector writes to renew at the fake clock's
// time.
func renewal(f *fenceFixture, holder string) resourcelock.LeaderElectionRecord {
	now := metav1.NewTime(f.clock.Now())
	return resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 15, AcquireTime: metav1.NewTime(tStart), RenewTime: now}
}

// TestFencingLockReportsWhenTheRenewalWasSent: a renewal that takes 4 s to
// be answered leaves the writes 6 s, not 10.
func TestFencingLockReportsWhenTheRenewalWasSent(t *testing.T) {
	f := newFenceFixture(t)
	inner := (&fakeLock{clock: f.clock, identity: "me"}).withLatency(4 * time.Second)
	lock := &fencingLock{Interface: inner, fence: f.fence, clock: f.clock}

	// Another holder's record seen while standing by changes nothing.
	inner.setHolder("other")
	if _, _, err := lock.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.refusedWith(t, "has not acquired")
	if lock.acquired.Load() {
		t.Error("acquired before any update")
	}

	if err := lock.Update(context.Background(), renewal(f, "me")); err != nil {
		t.Fatal(err)
	}
	if left := f.admitted(t); left != testRenewDeadline-4*time.Second {
		t.Errorf("after a renewal answered in 4 s a write may take %v, want %v", left, testRenewDeadline-4*time.Second)
	}
	if !lock.acquired.Load() {
		t.Error("not marked acquired after a successful update")
	}

	// A failed renewal moves nothing; the Lease seen held by a thief is lost.
	inner.err = errors.New("conflict")
	_ = lock.Update(context.Background(), renewal(f, "me"))
	if left := f.admitted(t); left != testRenewDeadline-8*time.Second {
		t.Errorf("after a failed renewal a write may take %v, want %v", left, testRenewDeadline-8*time.Second)
	}
	inner.err = nil
	inner.withLatency(0).setHolder("thief")
	if _, _, err := lock.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitLost(t, f.fence)
	if !strings.Contains(f.fence.Cause().Error(), "thief") {
		t.Errorf("cause %v does not name the new holder", f.fence.Cause())
	}
}

// TestFencingLockIgnoresRenewalsAStandbyCannotSee: a standby compares
// Leases with times in whole seconds, so a renewal in the same second as
// the one before does not restart its countdown; it must not extend the
// leader's window either.
func TestFencingLockIgnoresRenewalsAStandbyCannotSee(t *testing.T) {
	f := newFenceFixture(t) // tStart is on a whole second
	inner := &fakeLock{clock: f.clock, identity: "me"}
	lock := &fencingLock{Interface: inner, fence: f.fence, clock: f.clock}
	if err := lock.Create(context.Background(), renewal(f, "me")); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(600 * time.Millisecond)
	if err := lock.Update(context.Background(), renewal(f, "me")); err != nil {
		t.Fatal(err)
	}
	if left := f.admitted(t); left != testRenewDeadline-600*time.Millisecond {
		t.Errorf("after a renewal in the same second a write may take %v, want %v (the window of the first)", left, testRenewDeadline-600*time.Millisecond)
	}
	f.clock.Step(600 * time.Millisecond) // the next second
	if err := lock.Update(context.Background(), renewal(f, "me")); err != nil {
		t.Fatal(err)
	}
	if left := f.admitted(t); left != testRenewDeadline {
		t.Errorf("after a renewal in the next second a write may take %v, want %v", left, testRenewDeadline)
	}
}
