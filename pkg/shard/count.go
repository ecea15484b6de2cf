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
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// CountLabel is on every shard Lease: the --shards of the replica that
// wrote it. client-go's LeaseLock writes it with each acquisition and
// renewal, in the same request, so a Lease's holder and its count never
// disagree.
const CountLabel = "webapp.ydzs.io/shards"

// errOtherCount is wrapped by the error of an acquisition held back, or
// given up at once, because replicas with another --shards hold shard
// Leases: they serve other bucket runs under the same Lease names, so both
// would write the Books where the runs overlap.
var errOtherCount = errors.New("replicas with another --shards hold shard Leases")

// countGuard keeps a replica from serving any shard while a replica with
// another shard count serves one, so that --shards can be changed by a
// rolling update. Before each acquisition (the gate's Begin) it lists the
// Leases named <id>-shard-<i>, whatever i, and refuses while one of them
// is held, unexpired, by a replica whose CountLabel differs from ours (or
// is missing: a version that wrote none). Higher shard indices left by a
// larger count are among them; each stops counting once released (no
// holder) or expired.
//
// "Unexpired" is judged on the Lease's own renewTime and duration, written
// by the holder's clock, plus margin for a skew between the two clocks: a
// crashed holder of another count delays the new count that much more; a
// stopped one releases its Leases and delays nothing.
//
// Check-then-acquire across different Lease names races: two replicas of
// different counts may both find the field clear and acquire two Leases
// within the same instant. So the shard's work checks again right after
// the acquisition, before building anything that writes (work.Run), and
// gives the Lease back if another count holds one: of two acquisitions the
// later one's re-check runs after both are stored, and the API server's
// lists are consistent reads, so at least the later one steps down, at
// worst both do and try again a retry period later. Neither has written a
// Book by then. What is left is clock skew beyond the margin (a crashed
// holder's Lease is judged by our clock against its holder's renewTime),
// and the Lease of a replica without shards, <id>, which is not looked
// at: a change from or to no sharding still needs every replica stopped.
type countGuard struct {
	leases    coordinationv1client.LeasesGetter
	namespace string
	// prefix is "<id>-shard-"; count is ours, as CountLabel spells it.
	prefix, count string
	margin        time.Duration
	timeout       time.Duration
	clock         clock.PassiveClock
	// blocking is the number of Leases of another count at the last check,
	// for the metrics.
	blocking atomic.Int32
	// mu guards logged, the blocking Leases last logged, so that each
	// change is logged once: the slots' elector goroutines all check.
	mu     sync.Mutex
	logged string
	// logger is Replica.Run's, set before any slot runs.
	logger klog.Logger
}

// newCountGuard is the guard of cfg's replica. clk must be the clock that
// client-go's elector writes renewTime with: the real one.
func newCountGuard(cfg *Config, clk clock.PassiveClock) *countGuard {
	return &countGuard{
		leases: cfg.Leases, namespace: cfg.Lease.Namespace,
		prefix: strings.TrimSuffix(LeaseName(cfg.Lease.Name, 0), "0"),
		count:  strconv.Itoa(len(cfg.Shards)), margin: cfg.Lease.LeaseDuration,
		timeout: cfg.Lease.RenewDeadline, clock: clk, logger: klog.Background(),
	}
}

// labels are the labels of our shard Leases.
func (g *countGuard) labels() map[string]string { return map[string]string{CountLabel: g.count} }

// check returns an error wrapping errOtherCount, naming the Leases, while a
// replica of another count holds a shard Lease, and nil when none does.
func (g *countGuard) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	list, err := g.leases.Leases(g.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the shard Leases to check their shard counts: %w", err)
	}
	other, counts := g.otherCount(list.Items)
	g.blocking.Store(int32(len(other)))
	g.report(other, counts)
	if len(other) > 0 {
		return fmt.Errorf("%w (--shards %s: %s); this replica has --shards %s and waits for them to stop",
			errOtherCount, strings.Join(counts, ", "), strings.Join(other, ", "), g.count)
	}
	return nil
}

// otherCount picks the shard Leases held, unexpired, by a replica of
// another count, and the counts they carry, each sorted.
func (g *countGuard) otherCount(leases []coordinationv1.Lease) (names, counts []string) {
	now := g.clock.Now()
	for _, l := range leases {
		if !g.isShardLease(l.Name) || l.Labels[CountLabel] == g.count || !g.held(l, now) {
			continue
		}
		names = append(names, l.Name)
		c := l.Labels[CountLabel]
		if c == "" {
			c = "unknown"
		}
		if !slices.Contains(counts, c) {
			counts = append(counts, c)
		}
	}
	slices.Sort(names)
	slices.Sort(counts)
	return names, counts
}

// isShardLease: name is <id>-shard-<i>, for any number i.
func (g *countGuard) isShardLease(name string) bool {
	i, ok := strings.CutPrefix(name, g.prefix)
	if !ok {
		return false
	}
	_, err := strconv.Atoi(i)
	return err == nil
}

// held: the Lease names a holder and its renewal plus its duration plus
// the margin is still to come.
func (g *countGuard) held(l coordinationv1.Lease, now time.Time) bool {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" {
		return false
	}
	if s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return true // no way to tell it has expired
	}
	end := s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds)*time.Second + g.margin)
	return now.Before(end)
}

// report logs the Leases of another count each time they change: once when
// this replica starts waiting, once when it stops.
func (g *countGuard) report(other, counts []string) {
	key := strings.Join(other, ",")
	g.mu.Lock()
	defer g.mu.Unlock()
	if key == g.logged {
		return
	}
	prev := g.logged
	g.logged = key
	if key == "" {
		g.logger.Info("No replica with another --shards holds a shard Lease any more; taking shards", "shards", g.count, "released", prev)
		return
	}
	g.logger.Info(fmt.Sprintf("Replicas with --shards %s still hold shard Leases %s; waiting for them to stop",
		strings.Join(counts, ", "), strings.Join(other, ", ")), "shards", g.count)
}
