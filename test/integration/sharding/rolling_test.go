//go:build linux

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

package sharding_test

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/shard"
	"ydzs.io/book-controller/test/integration/framework"
)

// TestShardCountRollingChange: --shards changed from 2 to 3 the way a
// RollingUpdate does it, with no other step. Two replicas with --shards 2
// hold a shard each; three with --shards 3 start beside them and, seeing
// the Leases of another count held, take no shard, say so once, export
// it, and are ready. The old replicas then stop one by one: the shard the
// first releases goes to the other old one, not to a new one, and once the
// last has stopped the new ones take the three shards. The audit log shows
// every write of the old replicas before every write of the new ones, each
// generation's writes inside its writer's hold of its own shard's Lease,
// each ConfigMap created once; every Book is Ready and serves the edits
// made before, during and after the change.
func TestShardCountRollingChange(t *testing.T) {
	leaseNS := env.Namespace(t)
	namespaces := []string{"roll-0", "roll-1", "roll-2"}
	env.NamedNamespaces(t, namespaces...)
	old := startReplicasWith(t, leaseNS, "roll", 2, 2)
	oldHolders := env.WaitForShardHolders(t, leaseNS, "roll", 2, old...)
	books := createBooks(t, namespaces, 10, "v1")
	waitConverged(t, [][]*webappv2.Book{books}, "v1")

	started := time.Now()
	fresh := startReplicasWith(t, leaseNS, "roll", 3, shards)
	waitLine := fmt.Sprintf("Replicas with --shards 2 still hold shard Leases %s, %s; waiting for them to stop",
		shard.LeaseName("roll", 0), shard.LeaseName("roll", 1))
	for _, r := range fresh {
		framework.Eventually(t, r.Name+" to wait for the replicas with --shards 2", func(ctx context.Context) error {
			families, err := framework.ScrapeMetrics(r.MetricsAddr)
			if err != nil {
				return err
			}
			n, _ := framework.MetricValue(families, "book_controller_shard_leases_other_count")
			return poll.Done(n == 2 && r.CountLines(waitLine) == 1, "book_controller_shard_leases_other_count %v, wait line logged %d times", n, r.CountLines(waitLine))
		})
		framework.Eventually(t, r.Name+" to be ready while it waits", framework.AnswersOK(r.ProbeAddr, "/readyz"))
	}
	updateBooks(t, books, "v2") // served by the old replicas alone
	waitConverged(t, [][]*webappv2.Book{books}, "v2")

	// The first old replica stops: its shard is free, and only the other
	// old replica, a lease duration later, may take it.
	stopReplica(t, oldHolders[0])
	env.WaitForShardHolders(t, leaseNS, "roll", 2, oldHolders[1])
	updateBooks(t, books, "v3")
	waitConverged(t, [][]*webappv2.Book{books}, "v3")

	stopReplica(t, oldHolders[1])
	lastOld := time.Now()
	holders := env.WaitForShardHolders(t, leaseNS, "roll", shards, fresh...)
	t.Logf("the new replicas waited %v from their start; they held all 3 shards %v after the last old replica exited",
		time.Since(started).Round(time.Millisecond), time.Since(lastOld).Round(time.Millisecond))
	framework.ExpectTakeover(t, "the new replicas took every shard after the last old one stopped", lastOld, time.Now(), framework.TestLeaderTimings.LeaseDuration)
	added := createBooksNamed(t, namespaces, 2, "added", "v4")
	updateBooks(t, books, "v4")
	all := slices.Concat(books, added)
	waitConverged(t, [][]*webappv2.Book{all}, "v4")
	for i, r := range holders {
		waitCachesHoldShard(t, r, i)
		families := framework.Scrape(t, r.MetricsAddr)
		if n, err := framework.MetricValue(families, "book_controller_shard_leases_other_count"); err != nil || n != 0 {
			t.Errorf("%s: book_controller_shard_leases_other_count %v (%v) holding shard %d, want 0", r.Name, n, err, i)
		}
	}
	checkCountLabels(t, leaseNS, "roll")
	for _, r := range fresh {
		// A line per change of the Leases waited for ({0, 1}, {1} while
		// the first old replica's shard was free, {0, 1}), not per retry;
		// and one once they were gone. The last old replica releases its
		// two Leases one after the other, milliseconds apart: a check in
		// between sees the one not yet released alone, a fourth line
		// (seen in make test-fork on a loaded machine, 2026-12-06).
		if n := r.CountLines("waiting for them to stop"); n < 1 || n > 4 {
			t.Errorf("%s logged %d lines saying it waits, want 1 to 4", r.Name, n)
		}
		if n := r.CountLines("No replica with another --shards holds a shard Lease any more"); n != 1 {
			t.Errorf("%s logged %d lines saying it stopped waiting, want 1", r.Name, n)
		}
		// client-go's elector logs each refused attempt, at error level.
		t.Logf("%s: %d wait lines, %d refused attempts logged", r.Name, r.CountLines("waiting for them to stop"),
			r.CountLines("replicas with another --shards hold shard Leases"))
	}

	events := env.AuditLog(t)
	checkCreatedOnce(t, events, all)
	checkGenerations(t, events, leaseNS, "roll", all, old, fresh)
	checkLeadershipsBetween(t, events, leaseNS, "roll", framework.BooksByShard(all, 2), time.Time{}, lastOld)
	checkLeadershipsBetween(t, events, leaseNS, "roll", framework.BooksByShard(all, shards), lastOld, time.Now())
}

// stopReplica stops r as a Deployment would, and waits for its exit 0.
func stopReplica(t *testing.T, r *framework.Replica) {
	t.Helper()
	if err := r.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := r.Wait(30 * time.Second); err != nil || code != 0 {
		t.Fatalf("%s after SIGTERM: exit %d (%v), want 0", r.Name, code, err)
	}
}

// checkCountLabels: each shard Lease of the new count carries it.
func checkCountLabels(t *testing.T, leaseNS, leaseID string) {
	t.Helper()
	for i := range shards {
		l, err := env.Kube.CoordinationV1().Leases(leaseNS).Get(context.Background(), shard.LeaseName(leaseID, i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Labels[shard.CountLabel]; got != fmt.Sprint(shards) {
			t.Errorf("Lease %s: %s=%q, want %d", l.Name, shard.CountLabel, got, shards)
		}
	}
}

// checkGenerations: every write concerning the Books by a replica of the
// old count was received before every one by a replica of the new count,
// and no new replica was named the holder of a shard Lease before the last
// write of an old one: the two counts never served Books at once.
func checkGenerations(t *testing.T, events []auditv1.Event, leaseNS, leaseID string, books []*webappv2.Book, old, fresh []*framework.Replica) {
	t.Helper()
	var keys []string
	for _, b := range books {
		keys = append(keys, b.Namespace+"/"+b.Name)
	}
	isOf := func(rs []*framework.Replica, id string) bool {
		return slices.ContainsFunc(rs, func(r *framework.Replica) bool { return r.Identity == id })
	}
	var lastOld, firstNew framework.AuditWrite
	for _, w := range framework.ShardWrites(events, keys) {
		switch {
		case isOf(old, w.Writer) && w.At.After(lastOld.At):
			lastOld = w
		case isOf(fresh, w.Writer) && (firstNew.At.IsZero() || w.At.Before(firstNew.At)):
			firstNew = w
		case !isOf(old, w.Writer) && !isOf(fresh, w.Writer):
			t.Errorf("a write by no replica of the test: %s", w)
		}
	}
	if lastOld.At.IsZero() || firstNew.At.IsZero() || !lastOld.At.Before(firstNew.At) {
		t.Fatalf("the last write of an old replica (%s) is not before the first of a new one (%s)", lastOld, firstNew)
	}
	t.Logf("last write of --shards 2 at %s, first of --shards 3 %v later", lastOld.At.Format("15:04:05.000"),
		firstNew.At.Sub(lastOld.At).Round(time.Millisecond))
	for i := range shards {
		lease := shard.LeaseName(leaseID, i)
		writes, err := framework.LeaseWrites(events, leaseNS, lease)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range writes {
			if isOf(fresh, w.Holder) && w.At.Before(lastOld.At) {
				t.Errorf("%s named a replica with --shards %d the holder before the last write of --shards 2 (%s): %s", lease, shards, lastOld, w)
			}
		}
	}
}
