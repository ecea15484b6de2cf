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

package manager

// Sharding (pkg/shard, --shards): the manager's side of it. Run takes its
// steps from here when Config.Shards is above 1.

import (
	"context"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/leader"
	"ydzs.io/book-controller/pkg/shard"
)

// sharded reports whether the Books are split over shards.
func (m *manager) sharded() bool { return m.cfg.Shards > 1 }

// planShards checks the sharding settings and computes the shards' bucket
// runs.
func (m *manager) planShards() error {
	switch {
	case !m.sharded():
		return nil
	case m.cfg.Shards > shard.Max:
		return fmt.Errorf("%d shards are more than the %d allowed", m.cfg.Shards, shard.Max)
	case !m.cfg.LeaderElection.Enabled:
		return fmt.Errorf("%d shards need leader election: each shard is served by the holder of its Lease", m.cfg.Shards)
	}
	m.shards = shard.Equal(m.cfg.Shards)
	return nil
}

// buildShard is shard.Config.Build: the writing clients of shard s behind
// its fence, and on them a stack that lists and watches s alone. The
// fence closes the clients' connections when the shard's elector returns.
func (m *manager) buildShard(ctx context.Context, s shard.Shard, fence *leader.Fence) (shard.Stack, error) {
	w, err := newWriters(m.clients.base, fence)
	if err != nil {
		return nil, err
	}
	return m.buildStack(ctx, w, &s)
}

// workShards runs every shard's slot until ctx ends and each has drained
// and released its shard, or one fails.
func (m *manager) workShards(ctx context.Context) error {
	le := m.cfg.LeaderElection
	klog.FromContext(ctx).Info("Starting Book controller", "namespace", namespaceOrAll(m.cfg.Namespace),
		"workers", m.cfg.Workers, "shards", m.cfg.Shards, "leaderElection", le.Enabled, "identity", le.Identity,
		"leases", le.Namespace+"/"+shard.LeaseName(le.ID, 0)+"..", "layersOff", m.cfg.Controller.Off.Names())
	// fork:begin v2
	if m.cfg.StorageMigration {
		// Each shard's stack runs in its own slot; the migrator is the
		// process's, and would need a leader of the whole.
		klog.FromContext(ctx).Info("Storage migration does not run with --shards; storedVersions is left to kube-controller-manager")
	}
	// fork:end v2
	return m.replica.Run(ctx)
}

// watchShards registers the metrics of a sharded manager: how many shards
// it holds, and per shard whether it holds it and how many Books and
// ConfigMaps its caches hold. A shard not held has no caches and so no
// cached-objects series.
func (m *managerMetrics) watchShards(replica *shard.Replica) {
	m.registry.MustRegister(&shardsCollector{
		replica: replica,
		held: prometheus.NewDesc("book_controller_shards_held",
			"Number of shards whose Lease this replica holds.", nil, nil),
		leader: prometheus.NewDesc("leader_election_master_status",
			"1 when this replica holds the Lease named, 0 when it does not.", []string{"name"}, nil),
		cached: prometheus.NewDesc("book_controller_cached_books",
			"Number of Books in the informer cache of each shard held.", []string{"shard"}, nil),
		cachedCMs: prometheus.NewDesc("book_controller_cached_configmaps",
			"Number of ConfigMaps in the informer cache of each shard held.", []string{"shard"}, nil),
		otherCount: prometheus.NewDesc("book_controller_shard_leases_other_count",
			"Number of shard Leases held by replicas with another --shards at this replica's last attempt to take a shard; while not 0 it takes none.", nil, nil),
	})
}

// shardsCollector reads the shards' state at each scrape.
type shardsCollector struct {
	replica                         *shard.Replica
	held, leader, cached, cachedCMs *prometheus.Desc
	otherCount                      *prometheus.Desc
}

func (c *shardsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.held
	ch <- c.leader
	ch <- c.cached
	ch <- c.cachedCMs
	ch <- c.otherCount
}

func (c *shardsCollector) Collect(ch chan<- prometheus.Metric) {
	held := 0
	for _, s := range c.replica.Status() {
		leading := 0.0
		if s.Held {
			held++
			leading = 1
		}
		ch <- prometheus.MustNewConstMetric(c.leader, prometheus.GaugeValue, leading, s.Lease)
		if s.Cached {
			i := strconv.Itoa(s.Shard.Index)
			ch <- prometheus.MustNewConstMetric(c.cached, prometheus.GaugeValue, float64(s.CachedBooks), i)
			ch <- prometheus.MustNewConstMetric(c.cachedCMs, prometheus.GaugeValue, float64(s.CachedConfigMaps), i)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(held))
	ch <- prometheus.MustNewConstMetric(c.otherCount, prometheus.GaugeValue, float64(c.replica.LeasesOfOtherCount()))
}
