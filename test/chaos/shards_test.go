//go:build chaos && linux

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

package chaos_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/shard"
	"ydzs.io/book-controller/test/integration/framework"
)

// The sharding tests run four replicas with --shards 3 (three holders and
// a spare, as manifests/overlays/sharded does) over 30 namespaces with
// CHAOS_BOOKS/10 Books in each (100 at the default scale), the Books of
// every namespace spread over the shards by their UIDs, and judge them from
// the API server: shard Leases and writes in the audit log, the Books and
// ConfigMaps in the end. A sharded replica watches every namespace, so
// these tests, like all here, run one at a time.
const (
	shardCount  = 3
	shardNSEach = 10
)

// shardedRun is one test's replicas and namespaces.
type shardedRun struct {
	leaseNS, leaseID string
	nss              []string
	replicas         []*framework.Replica
	want             map[string]map[string]spec // namespace → Book → spec
}

func startSharded(t *testing.T, leaseID string, replicas int, viaProxy bool) *shardedRun {
	t.Helper()
	s := &shardedRun{leaseNS: env.Namespace(t), leaseID: leaseID, want: map[string]map[string]spec{}}
	for k := range shardCount * shardNSEach {
		s.nss = append(s.nss, fmt.Sprintf("%s-%d", leaseID, k))
	}
	env.NamedNamespaces(t, s.nss...)
	for k := range replicas {
		s.replicas = append(s.replicas, s.start(t, k, viaProxy))
	}
	return s
}

func (s *shardedRun) start(t *testing.T, k int, viaProxy bool) *framework.Replica {
	return env.StartReplica(t, binary, fmt.Sprintf("%s-%d", s.leaseID, k), framework.ReplicaOptions{
		Namespace: s.leaseNS, LeaseID: s.leaseID, Shards: shardCount, ViaProxy: viaProxy, Args: []string{"-v=2"}})
}

func (s *shardedRun) namespaces() []string { return s.nss }

// holders waits for every shard to be held by a different running replica.
func (s *shardedRun) holders(t *testing.T) []*framework.Replica {
	return env.WaitForShardHolders(t, s.leaseNS, s.leaseID, shardCount, s.replicas...)
}

// create creates perNS Books (prefix-00000 on) in each namespace given.
func (s *shardedRun) create(t *testing.T, namespaces []string, prefix string, perNS int) {
	t.Helper()
	for _, ns := range namespaces {
		if s.want[ns] == nil {
			s.want[ns] = map[string]spec{}
		}
		specs := map[string]spec{}
		for i := range perNS {
			name := bookName(prefix, i)
			specs[name] = spec{title: fmt.Sprintf("%s in %s", name, ns), price: int32(i)}
		}
		createSpecs(t, ns, specs)
		for name, sp := range specs {
			s.want[ns][name] = sp
		}
	}
}

// update gives every Book of the namespace a new title.
func (s *shardedRun) update(t *testing.T, ns, round string) {
	t.Helper()
	names := make([]string, 0, len(s.want[ns]))
	for name := range s.want[ns] {
		names = append(names, name)
	}
	for name, sp := range updateSpecs(t, ns, names, func(name string, old webappv2.BookSpec) spec {
		return spec{title: round + " " + name, price: old.Price.WholeUnits()}
	}) {
		s.want[ns][name] = sp
	}
}

// converged waits until every namespace holds exactly the Books wanted,
// Ready with their ConfigMaps.
func (s *shardedRun) converged(t *testing.T) {
	t.Helper()
	for _, ns := range s.namespaces() {
		waitConverged(t, ns, expectation{want: s.want[ns]})
	}
}

// check judges the shards from the audit log: no write outside its
// writer's hold of the shard's Lease, no two holders at once. The Books are
// placed in shards by their UIDs, listed now.
func (s *shardedRun) check(t *testing.T) []*framework.LeadershipReport {
	t.Helper()
	var books []*webappv2.Book
	for _, ns := range s.nss {
		list, err := env.Books.WebappV2().Books(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			books = append(books, &list.Items[i])
		}
	}
	reps := env.CheckShardLeaderships(t, s.leaseNS, s.leaseID, framework.BooksByShard(books, shardCount), timings.RenewDeadline)
	for _, r := range reps {
		writesAfterLoss.Add(int64(len(r.Outside)))
	}
	return reps
}

// TestShardHolderKilled: three holders and a spare, 30 namespaces ×
// CHAOS_BOOKS/10 Books: every Book Ready, each holder caching its shard's
// Books only, the spare none. Then, while every Book is updated namespace
// by namespace (each holds Books of every shard) and Books are added to ten
// namespaces, the holder of shard 1 is killed
// with SIGKILL: the spare must take shard 1 within the lease duration + 5 s,
// the other shards keep being written meanwhile, and every Book converges
// to its last spec; the audit log shows each shard written by one replica
// at a time.
func TestShardHolderKilled(t *testing.T) {
	perNS := max(config.books/10, 2)
	s := startSharded(t, "shard-kill", shardCount+1, false)
	holders := s.holders(t)
	spare := s.replicas[slices.IndexFunc(s.replicas, func(r *framework.Replica) bool { return !slices.Contains(holders, r) })]
	start := time.Now()
	s.create(t, s.namespaces(), "book", perNS)
	s.converged(t)
	total := shardCount * shardNSEach * perNS
	figure(t, "%d Books over %d namespaces and %d shards Ready in %v", total, len(s.namespaces()), shardCount, time.Since(start).Round(time.Second))

	var counts []string
	for i, r := range holders {
		var want, others int
		poll.Eventually(t, fmt.Sprintf("%s to cache the Books of shard %d alone", r.Name, i), pollInterval, time.Minute,
			func(ctx context.Context) error {
				got, err := framework.CachedBooks(r.MetricsAddr)
				if err != nil {
					return err
				}
				// The holder watches every namespace: Books that earlier
				// tests left count too. A fresh-clone run found 30 Books
				// of a namespace already gone, minutes after its test:
				// most likely finalized by the namespace controller while
				// kube-apiserver restarted (TestAPIServerKilled) and did
				// not yet serve the Book CRD's discovery, so the Books
				// stayed in etcd; alone, the same namespace empties in 10 s.
				if want, others, err = booksInShard(ctx, s.namespaces(), i); err != nil {
					return err
				}
				return poll.Done(got == float64(want+others), "book_controller_cached_books %v; shard %d has %d of this test's Books and %d of other tests'", got, i, want, others)
			})
		counts = append(counts, fmt.Sprintf("shard %d: %d", i, want))
	}
	if n, err := framework.CachedBooks(spare.MetricsAddr); err == nil {
		t.Errorf("the spare %s caches %v Books, want none", spare.Name, n)
	}

	// The workload: every Book updated, shard 1's namespaces first in each
	// turn, and two new Books in each of shard 1's; the kill comes after
	// the first turn.
	victim := holders[1]
	var killedAt time.Time
	var once sync.Once
	kill := func() {
		once.Do(func() {
			if err := victim.Kill(); err != nil {
				t.Error(err)
			}
			killedAt = victim.KilledAt()
			faults.Add(1)
		})
	}
	for k, ns := range s.namespaces() {
		s.update(t, ns, "r1")
		if k%shardCount == 1 {
			s.create(t, []string{ns}, "added", 2)
		}
		if k == shardCount-1 {
			kill()
		}
	}
	s.replicas = append(s.replicas, s.start(t, len(s.replicas), false)) // the Deployment replaces the pod
	s.converged(t)

	reps := s.check(t)
	next, ok := reps[1].FirstLeadershipAfter(killedAt, victim.Identity)
	if !ok {
		t.Fatalf("the audit log shows no takeover of shard 1 after the kill of %s", victim.Name)
	}
	took := framework.ExpectTakeover(t, "shard 1 after the kill", killedAt, next.From, timings.LeaseDuration)
	recordTakeover(took)
	if next.Holder != spare.Identity {
		t.Errorf("shard 1 was taken by %s, want the spare %s", next.Holder, spare.Identity)
	}
	// The other shards were written between the kill and the takeover.
	others := 0
	for i := range shardCount {
		if i == 1 {
			continue
		}
		for _, w := range reps[i].Writes {
			if w.At.After(killedAt) && w.At.Before(next.From) {
				others++
			}
		}
	}
	if others == 0 {
		t.Errorf("no write to shards 0 and 2 between the kill (%s) and the takeover (%s): they stopped converging",
			killedAt.Format("15:04:05.000"), next.From.Format("15:04:05.000"))
	}
	figure(t, "holder of shard 1 SIGKILLed mid-update: the spare took it over %v later (lease %v); %d writes to shards 0 and 2 meanwhile; cached Books %s",
		took.Round(10*time.Millisecond), timings.LeaseDuration, others, strings.Join(counts, ", "))
}

// TestShardHolderPartitioned black-holes the connection of shard 1's holder
// for 20 s while its Books are updated: the spare takes the shard within
// the lease duration + 5 s; no write of the cut-off replica lands after its
// hold of the shard's Lease ended, none at all after the heal; it does not
// exit but stands by, holding nothing; every Book converges.
func TestShardHolderPartitioned(t *testing.T) {
	const partition = 20 * time.Second
	perNS := max(config.books/20, 2)
	s := startSharded(t, "shard-cut", shardCount+1, true)
	holders := s.holders(t)
	s.create(t, s.namespaces(), "book", perNS)
	s.converged(t)

	old := holders[1]
	cutAt := time.Now()
	old.Proxy.BlackHole()
	faults.Add(1)
	for _, ns := range s.namespaces() {
		s.update(t, ns, "cut")
	}
	time.Sleep(time.Until(cutAt.Add(partition)))
	old.Proxy.Pass()
	healedAt := time.Now()
	for _, ns := range s.namespaces() {
		s.update(t, ns, "healed")
	}
	s.converged(t)
	poll.Eventually(t, old.Name+" to hold no shard after the heal, and stand by", pollInterval, time.Minute, func(context.Context) error {
		families, err := framework.ScrapeMetrics(old.MetricsAddr)
		if err != nil {
			return err
		}
		held, err := framework.MetricValue(families, "book_controller_shards_held")
		if err != nil {
			return err
		}
		return poll.Done(held == 0, "book_controller_shards_held %v", held)
	})
	if !old.Running() {
		t.Errorf("%s exited after losing its only shard; a sharded replica stands by instead:\n%s", old.Name, old.Tail(5))
	}

	reps := s.check(t)
	next, ok := reps[1].FirstLeadershipAfter(cutAt, old.Identity)
	if !ok {
		t.Fatalf("the audit log shows no takeover of shard 1 after the partition")
	}
	took := framework.ExpectTakeover(t, "shard 1 after the partition began", cutAt, next.From, timings.LeaseDuration)
	recordTakeover(took)
	lastHold, _ := reps[1].LastLeadershipOf(old.Identity, cutAt)
	var inFlight int
	for _, w := range reps[1].Writes {
		switch {
		case w.Writer != old.Identity:
		case w.At.After(healedAt):
			t.Errorf("a write of the cut-off holder reached the API server after the heal at %s: %s", healedAt.Format("15:04:05.000"), w)
		case w.At.After(lastHold.Until):
			t.Errorf("a write of the cut-off holder after its hold of shard 1 ended at %s: %s", lastHold.Until.Format("15:04:05.000"), w)
		case w.At.After(cutAt):
			inFlight++
		}
	}
	figure(t, "holder of shard 1 partitioned for %v: taken over %v after the cut by %s; its hold ended %v after the cut; none of its writes after that (%d in flight at the cut)",
		partition, took.Round(10*time.Millisecond), next.Holder, lastHold.Until.Sub(cutAt).Round(10*time.Millisecond), inFlight)
}

// booksInShard counts the Books whose UID falls into shard i of
// shardCount: in the test's namespaces (own), and elsewhere (others),
// which another test left behind and the holder of shard i caches too.
func booksInShard(ctx context.Context, own []string, i int) (mine, others int, err error) {
	list, err := env.Books.WebappV2().Books(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	for _, b := range list.Items {
		switch {
		case shard.Of(b.UID, shardCount) != i:
		case slices.Contains(own, b.Namespace):
			mine++
		default:
			others++
		}
	}
	return mine, others, nil
}
