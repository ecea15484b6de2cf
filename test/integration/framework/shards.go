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
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/shard"
)

// NamedNamespaces creates the namespaces given and deletes them at
// cleanup.
func (e *Env) NamedNamespaces(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := e.Kube.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating namespace %s: %v", name, err)
		}
		t.Cleanup(func() {
			_ = e.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
}

// BooksByShard is the keys (namespace/name) of the Books in each of n
// shards, placed by their UIDs as the API server places them.
func BooksByShard(books []*webappv2.Book, n int) [][]string {
	out := make([][]string, n)
	for _, b := range books {
		i := shard.Of(b.UID, n)
		out[i] = append(out[i], b.Namespace+"/"+b.Name)
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

// ShardWrites are the controller writes that concern the given Books (one
// shard's, as namespace/name keys): to the Books, their status, their
// ConfigMaps (named after their Book) and their Events (named
// <book>.<suffix> by client-go's recorder).
func ShardWrites(events []auditv1.Event, books []string) []AuditWrite {
	in := map[string]bool{}
	for _, key := range books {
		in[key] = true
	}
	var out []AuditWrite
	for _, w := range ControllerWrites(events, "") {
		key := w.Object
		if w.Resource == "events" {
			if i := strings.LastIndex(key, "."); i > 0 {
				key = key[:i]
			}
		}
		if in[key] {
			out = append(out, w)
		}
	}
	return out
}

// CheckShardLeaderships reads the audit log and, shard by shard, fails the
// test on any controller write concerning the shard's Books (byShard[i],
// namespace/name keys, from BooksByShard) made
// outside its writer's hold of the shard's Lease, and on two holds that
// overlap: each Book is written by one replica at a time. It returns the
// reports.
func (e *Env) CheckShardLeaderships(t testing.TB, namespace, leaseID string, byShard [][]string, renewDeadline time.Duration) []*LeadershipReport {
	t.Helper()
	events := e.AuditLog(t)
	out := make([]*LeadershipReport, len(byShard))
	for i, books := range byShard {
		lease := shard.LeaseName(leaseID, i)
		r, err := LeadershipsOver(events, namespace, lease, ShardWrites(events, books), renewDeadline)
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

// CachedConfigMaps is a replica's book_controller_cached_configmaps,
// summed over the shards it holds.
func CachedConfigMaps(addr string) (float64, error) {
	families, err := ScrapeMetrics(addr)
	if err != nil {
		return 0, err
	}
	return MetricValue(families, "book_controller_cached_configmaps")
}
