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
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"ydzs.io/book-controller/internal/leasetest"
	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/leader"
)

// putLease stores a Lease named name held by holder ("" for a released
// one), renewed at renewed for 4 s, with CountLabel count ("" for none).
func putLease(t *testing.T, leases *coordinationv1.LeaseList, name, holder, count string, renewed time.Time) {
	t.Helper()
	l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: leaseNS, Name: name}}
	if count != "" {
		l.Labels = map[string]string{CountLabel: count}
	}
	at := metav1.NewMicroTime(renewed)
	l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(4)), RenewTime: &at}
	leases.Items = append(leases.Items, l)
}

// TestCountGuard: with --shards 3, a shard Lease blocks while it is held,
// unexpired by its own renewTime and duration plus the margin, by a
// replica whose count label is another or missing; a Lease of our count,
// a released or an expired one, a higher index once released, and Leases
// of other names do not; the guard says which Leases and counts block, and
// clears once they are gone.
func TestCountGuard(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	kube := leasetest.NewClientset()
	g := newCountGuard(&Config{
		Shards: Equal(3), Leases: kube.CoordinationV1(),
		Lease: leader.Config{Namespace: leaseNS, Name: leaseID, LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second},
	}, clocktesting.NewFakePassiveClock(now))
	var all coordinationv1.LeaseList
	putLease(t, &all, LeaseName(leaseID, 0), "old-a", "2", now.Add(-time.Second))    // held: blocks
	putLease(t, &all, LeaseName(leaseID, 1), "old-b", "2", now.Add(-7*time.Second))  // 4 s + 4 s margin not over: blocks
	putLease(t, &all, LeaseName(leaseID, 2), "new-a", "3", now)                      // ours
	putLease(t, &all, LeaseName(leaseID, 3), "", "4", now)                           // released
	putLease(t, &all, LeaseName(leaseID, 4), "old-c", "5", now.Add(-9*time.Second))  // expired, margin included
	putLease(t, &all, LeaseName(leaseID, 5), "ancient", "", now.Add(-2*time.Second)) // no label: blocks
	putLease(t, &all, leaseID, "unsharded", "", now)                                 // not a shard Lease
	putLease(t, &all, LeaseName(leaseID, 0)+"x", "stranger", "2", now)               // not a shard Lease
	putLease(t, &all, LeaseName("other-"+leaseID, 0), "neighbour", "2", now)         // another controller's
	for i := range all.Items {
		if _, err := kube.CoordinationV1().Leases(leaseNS).Create(context.Background(), &all.Items[i], metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	err := g.check(context.Background())
	want := []string{"--shards 2, unknown", LeaseName(leaseID, 0), LeaseName(leaseID, 1), LeaseName(leaseID, 5), "this replica has --shards 3"}
	if !errors.Is(err, errOtherCount) || !containsAll(err.Error(), want...) || strings.Contains(err.Error(), LeaseName(leaseID, 4)) {
		t.Fatalf("check: %v, want errOtherCount naming %q and not shard 4", err, want)
	}
	if n := g.blocking.Load(); n != 3 {
		t.Errorf("blocking %d, want 3", n)
	}
	for _, i := range []int{0, 1, 5} {
		l := leasetest.Get(t, kube, leaseNS, LeaseName(leaseID, i))
		l.Spec.HolderIdentity = ptr.To("") // released, as a graceful stop does
		if _, err := kube.CoordinationV1().Leases(leaseNS).Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.check(context.Background()); err != nil || g.blocking.Load() != 0 {
		t.Errorf("check once the other count's Leases are released: %v, blocking %d; want nil, 0", err, g.blocking.Load())
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestReplicaWaitsForAnotherCount: a replica with --shards 1 takes no
// shard, and stays ready, while a replica with --shards 4 holds shard 3's
// Lease, though its own shard's Lease is free; once that Lease is released
// it takes its shard, and its Lease carries its count. Three more checks of
// the shard Leases (each a List) after it first saw the other count are the
// marker: each was an attempt to take the shard, refused.
func TestReplicaWaitsForAnotherCount(t *testing.T) {
	f := newReplicaFixture(t)
	var checks atomic.Int32
	f.kube.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		checks.Add(1)
		return false, nil, nil
	})
	other := LeaseName(leaseID, 3)
	var all coordinationv1.LeaseList
	putLease(t, &all, other, "old", "4", time.Now())
	all.Items[0].Spec.LeaseDurationSeconds = ptr.To(int32(60))
	if _, err := f.kube.CoordinationV1().Leases(leaseNS).Create(context.Background(), &all.Items[0], metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := newFakeStack()
	f.stacks <- st
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := f.run(t, ctx)

	poll.Eventually(t, "the replica to see the other count", 10*time.Millisecond, 10*time.Second, func(context.Context) error {
		return poll.Done(f.replica.LeasesOfOtherCount() == 1, "blocking %d", f.replica.LeasesOfOtherCount())
	})
	seen := checks.Load()
	poll.Eventually(t, "three more checks of the shard Leases", 10*time.Millisecond, 10*time.Second, func(ctx context.Context) error {
		if _, err := f.kube.CoordinationV1().Leases(leaseNS).Get(ctx, LeaseName(leaseID, 0), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the replica's shard Lease was written while another count holds a Lease (get: %v)", err)
		}
		n := checks.Load() - seen
		return poll.Done(n >= 3, "%d more", n)
	})
	if s := f.status(t); s.Held || !f.replica.Synced() {
		t.Fatalf("while another count holds a Lease: status %+v, ready %v; want not held, ready", s, f.replica.Synced())
	}
	l := leasetest.Get(t, f.kube, leaseNS, other)
	l.Spec.HolderIdentity = ptr.To("")
	if _, err := f.kube.CoordinationV1().Leases(leaseNS).Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitRunning(t, st)
	if got := leasetest.Get(t, f.kube, leaseNS, LeaseName(leaseID, 0)).Labels[CountLabel]; got != "1" {
		t.Errorf("the shard Lease's %s label is %q, want 1", CountLabel, got)
	}
	if n := f.replica.LeasesOfOtherCount(); n != 0 {
		t.Errorf("LeasesOfOtherCount %d after taking the shard, want 0", n)
	}
	cancel()
	if err := wait(t, done); err != nil {
		t.Fatalf("Replica.Run: %v", err)
	}
}

// TestWorkGivesBackOnRecheck: a shard whose check right after the
// acquisition fails builds nothing and returns errGaveBack, so that its
// slot gives the Lease back and stands by.
func TestWorkGivesBackOnRecheck(t *testing.T) {
	built := false
	w := &work{shard: Equal(1)[0],
		check: func(context.Context) error { return errOtherCount },
		build: func(context.Context) (Stack, error) { built = true; return newFakeStack(), nil }}
	if err := w.Run(context.Background()); !errors.Is(err, errGaveBack) || !errors.Is(err, errOtherCount) || built {
		t.Fatalf("Run: %v, built %v; want errGaveBack wrapping errOtherCount, nothing built", err, built)
	}
}

// TestGateForgetsFreeWhileAnotherCountHolds: the time a shard was free
// while another count's Lease blocked every attempt does not count
// towards a replica holding a shard taking it as a second one: once the
// other count is gone, it still waits a lease duration.
func TestGateForgetsFreeWhileAnotherCountHolds(t *testing.T) {
	const ld = 4 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	kube := leasetest.NewClientset()
	g := newGate(ld, clk)
	g.guard = newCountGuard(&Config{Shards: Equal(3), Leases: kube.CoordinationV1(),
		Lease: leader.Config{Namespace: leaseNS, Name: leaseID, LeaseDuration: ld, RenewDeadline: 3 * time.Second}}, clk)
	var all coordinationv1.LeaseList
	putLease(t, &all, LeaseName(leaseID, 0), "old", "2", t0)
	if _, err := kube.CoordinationV1().Leases(leaseNS).Create(context.Background(), &all.Items[0], metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g.held[1] = true // this replica holds shard 1 already
	s2 := g.turnFor(2)
	if err := s2.Begin(); !errors.Is(err, errNotOurTurn) {
		t.Fatalf("Begin for a second shard just seen free: %v, want errNotOurTurn", err)
	}
	clk.SetTime(t0.Add(ld + time.Second))
	if err := s2.Begin(); !errors.Is(err, errOtherCount) {
		t.Fatalf("Begin a lease duration later, the other count's Lease unexpired with the margin: %v, want errOtherCount", err)
	}
	l := leasetest.Get(t, kube, leaseNS, LeaseName(leaseID, 0))
	l.Spec.HolderIdentity = ptr.To("")
	if _, err := kube.CoordinationV1().Leases(leaseNS).Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s2.Begin(); !errors.Is(err, errNotOurTurn) {
		t.Fatalf("Begin once the other count is gone, holding a shard: %v, want to wait a lease duration", err)
	}
	clk.SetTime(t0.Add(2*ld + 2*time.Second))
	if err := s2.Begin(); err != nil {
		t.Fatalf("Begin a lease duration after the other count was gone: %v", err)
	}
	s2.End(true)
}
