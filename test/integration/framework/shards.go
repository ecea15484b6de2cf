//go:build linux

package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/shard"
)

// ShardedNamespaces creates perShard namespaces in each of n shards (names
// chosen by their hash, so every shard gets its share) and deletes them at
// cleanup. It returns them by shard.
func (e *Env) ShardedNamespaces(t testing.TB, prefix string, n, perShard int) [][]string {
	t.Helper()
	out := make([][]string, n)
	prefix = sanitize(prefix)
	for k, full := 0, 0; full < n; k++ {
		name := fmt.Sprintf("%s-%d", prefix, k)
		i := shard.Of(name, n)
		if len(out[i]) == perShard {
			continue
		}
		if _, err := e.Kube.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating namespace %s: %v", name, err)
		}
		t.Cleanup(func() {
			_ = e.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
		if out[i] = append(out[i], name); len(out[i]) == perShard {
			full++
		}
	}
	return out
}

// ShardHolders is the holder of each of the n shard Leases ("" for none).
func (e *Env) ShardHolders(ctx context.Context, namespace, leaseID string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = e.LeaseHolder(ctx, namespace, shard.LeaseName(leaseID, i))
	}
	return out
}

// WaitForShardHolders waits until each of the n shards is held by one of
// replicas, by as many different replicas as there can be (min(n,
// len(replicas))), and returns the holder of each shard.
func (e *Env) WaitForShardHolders(t testing.TB, namespace, leaseID string, n int, replicas ...*Replica) []*Replica {
	t.Helper()
	holders := make([]*Replica, n)
	Eventually(t, fmt.Sprintf("%d shards held by %d replicas", n, min(n, len(replicas))), func(ctx context.Context) error {
		last := e.ShardHolders(ctx, namespace, leaseID, n)
		distinct := map[*Replica]bool{}
		for i, h := range last {
			holders[i] = nil
			for _, r := range replicas {
				if r.Identity == h && r.Running() {
					holders[i] = r
				}
			}
			if holders[i] == nil {
				return fmt.Errorf("shard holders %q: shard %d held by none of the running replicas", last, i)
			}
			distinct[holders[i]] = true
		}
		return poll.Done(len(distinct) == min(n, len(replicas)), "shard holders %q", last)
	})
	return holders
}

// ShardWrites are the controller writes to the given namespaces (one
// shard's).
func ShardWrites(events []auditv1.Event, namespaces []string) []AuditWrite {
	in := map[string]bool{}
	for _, ns := range namespaces {
		in[ns] = true
	}
	var out []AuditWrite
	for _, w := range ControllerWrites(events, "") {
		if ns, _, _ := strings.Cut(w.Object, "/"); in[ns] {
			out = append(out, w)
		}
	}
	return out
}

// CheckShardLeaderships reads the audit log and, shard by shard, fails the
// test on any controller write to the shard's namespaces (byShard[i]) made
// outside its writer's hold of the shard's Lease, and on two holds that
// overlap: each Book is written by one replica at a time. It returns the
// reports.
func (e *Env) CheckShardLeaderships(t testing.TB, namespace, leaseID string, byShard [][]string, renewDeadline time.Duration) []*LeadershipReport {
	t.Helper()
	events := e.AuditLog(t)
	out := make([]*LeadershipReport, len(byShard))
	for i, namespaces := range byShard {
		lease := shard.LeaseName(leaseID, i)
		r, err := LeadershipsOver(events, namespace, lease, ShardWrites(events, namespaces), renewDeadline)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range r.Periods {
			t.Logf("shard %d: %s", i, p)
		}
		for _, w := range r.Outside {
			t.Errorf("shard %d: a write outside its writer's hold of %s: %s", i, lease, w)
		}
		for _, o := range r.Overlaps {
			t.Errorf("shard %d: two holders at once: %s", i, o)
		}
		for _, w := range r.Stale {
			t.Errorf("shard %d: a write after %s named another holder: %s", i, lease, w)
		}
		out[i] = r
	}
	return out
}

// CachedBooks is a replica's book_controller_cached_books, summed over the
// shards it holds.
func CachedBooks(addr string) (float64, error) {
	families, err := ScrapeMetrics(addr)
	if err != nil {
		return 0, err
	}
	return MetricValue(families, "book_controller_cached_books")
}
