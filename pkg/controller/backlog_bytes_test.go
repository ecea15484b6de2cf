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

package controller

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// BenchmarkBacklogBytes measures what the controller holds per Book while a
// backlog drains, beside the informer caches: the work queue's bookkeeping
// per queued key (with pkg/metrics' workqueue provider, which this package
// imports, as the binary runs) and the
// own-write tracker's record per Book (ownwrites.go) written but not yet synced again. At
// N queued Books both live at once, and GOGC=50 adds up to half again:
//
//	go test ./pkg/controller -run '^$' -bench BacklogBytes -benchtime 3x
func BenchmarkBacklogBytes(b *testing.B) {
	const n = 10000
	keys := make([]cache.ObjectName, n)
	uids := make([]types.UID, n) // the Books' own, which the store shares
	for i := range keys {
		keys[i] = cache.ObjectName{Namespace: "bench-r1-ours-backlog-1", Name: fmt.Sprintf("book-%05d", i)}
		uids[i] = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
	}
	var queueBytes, storeBytes, backfillBytes float64
	for range b.N {
		before := liveHeap()
		q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "backlog-bytes"})
		for _, k := range keys {
			q.Add(k)
		}
		queued := liveHeap()
		s, _, _ := newTestOwnWrites()
		for i, k := range keys {
			s.wrote(k, uids[i], booksResource, strconv.Itoa(1000000+2*i))
			s.wrote(k, uids[i], configMapsResource, strconv.Itoa(1000001+2*i))
		}
		recorded := liveHeap()
		if q.Len() != n || len(s.books) != n {
			b.Fatalf("queue holds %d keys and the store %d records, want %d each", q.Len(), len(s.books), n)
		}
		q.ShutDown()
		queueBytes += float64(queued-before) / n
		storeBytes += float64(recorded-queued) / n
		backfillBytes += backfillKeyBytes(b, keys)
	}
	b.ReportMetric(queueBytes/float64(b.N), "B/queued-key")
	b.ReportMetric(storeBytes/float64(b.N), "B/own-write-record")
	b.ReportMetric(backfillBytes/float64(b.N), "B/backfill-key")
}

// backfillKeyBytes is what a key of the initial list costs in the
// live-first queue (livefirst.go) beyond what it costs in client-go's FIFO.
func backfillKeyBytes(b *testing.B, keys []cache.ObjectName) float64 {
	fill := func(name string, order *liveFirst) uint64 {
		before := liveHeap()
		cfg := workqueue.TypedQueueConfig[cache.ObjectName]{Name: name}
		if order != nil {
			cfg.Queue = order
		}
		q := workqueue.NewTypedWithConfig(cfg)
		for _, k := range keys {
			if order != nil {
				order.mark(k, nil, true)
			}
			q.Add(k)
		}
		used := liveHeap() - before
		if q.Len() != len(keys) {
			b.Fatalf("%s holds %d keys, want %d", name, q.Len(), len(keys))
		}
		q.ShutDown()
		return used
	}
	fifo := fill("backlog-bytes-fifo", nil)
	liveFirst := fill("backlog-bytes-live-first", newLiveFirst())
	return (float64(liveFirst) - float64(fifo)) / float64(len(keys))
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
