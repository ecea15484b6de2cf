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
	"testing"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// BenchmarkInitialList measures what the handlers cost per converged Book
// of an informer's initial list, its Book and its ConfigMap delivered with
// client-go's isInInitialList, up to the key waiting in the queue; with the live-first
// order (livefirst.go) and in arrival order. An informer reports synced
// only once its handler has taken every initial-list event, so this cost
// is part of the time to caches synced after a restart:
//
//	go test ./pkg/controller -run '^$' -bench InitialList -benchmem
func BenchmarkInitialList(b *testing.B) {
	const n = 10000
	books := make([]*webappv2.Book, n)
	configMaps := make([]*cachedConfigMap, n)
	for i := range books {
		books[i] = newBook(fmt.Sprintf("book-%05d", i), 1, "t", 1)
		books[i].Status.ObservedGeneration = books[i].Generation
		configMaps[i] = projectConfigMap(ownConfigMap(books[i]))
	}
	newBenchController(b, Options{}).queue.ShutDown() // the fake clients' one-time set-up
	for _, fifo := range []bool{false, true} {
		b.Run(fmt.Sprintf("fifo=%t", fifo), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				c := newBenchController(b, Options{Off: Layers{LiveFirst: fifo}})
				bookHandler, cmHandler := c.bookEventHandler(), c.configMapEventHandler()
				b.StartTimer()
				for i := range books {
					bookHandler.OnAdd(books[i], true)
					cmHandler.OnAdd(configMaps[i], true)
				}
				if c.queue.Len() != n {
					b.Fatalf("%d keys queued, want %d", c.queue.Len(), n)
				}
				b.StopTimer()
				c.queue.ShutDown()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/Book")
		})
	}
}
