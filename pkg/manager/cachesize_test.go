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
