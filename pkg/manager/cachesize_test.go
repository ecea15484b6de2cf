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

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestCacheSizeCountsAtMostOnceASecond: the gauge follows the store, a
// count being reused for cacheSizeAge and no longer.
func TestCacheSizeCountsAtMostOnceASecond(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	add := func(name string) {
		if err := store.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	add("a")
	add("b")
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC))
	size := newCacheSize(store, clock)
	if n := size.Len(); n != 2 {
		t.Fatalf("Len() = %d, want 2", n)
	}
	add("c")
	clock.SetTime(clock.Now().Add(cacheSizeAge - time.Millisecond))
	if n := size.Len(); n != 2 {
		t.Errorf("Len() = %d within %v of the last count, want that count, 2", n, cacheSizeAge)
	}
	clock.SetTime(clock.Now().Add(time.Millisecond))
	if n := size.Len(); n != 3 {
		t.Errorf("Len() = %d %v after the last count, want the store's 3", n, cacheSizeAge)
	}
}
