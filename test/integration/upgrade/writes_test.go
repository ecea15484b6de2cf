//go:build upgrade

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

package upgrade_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/test/integration/framework"
)

// configMapData is the data of every ConfigMap in ns, by name.
func configMapData(t *testing.T, ns string) map[string]map[string]string {
	list, err := env.Kube.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, cm := range list.Items {
		if cm.Name != "kube-root-ca.crt" {
			out[cm.Name] = cm.Data
		}
	}
	return out
}

// withValue is a copy of data with key set to value.
func withValue(data map[string]string, key, value string) map[string]string {
	out := maps.Clone(data)
	out[key] = value
	return out
}

// configMapsHold is a check that each ConfigMap named in want holds its
// data there.
func configMapsHold(ns string, want map[string]map[string]string) poll.Check {
	return func(ctx context.Context) error {
		list, err := env.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		got := map[string]map[string]string{}
		for _, cm := range list.Items {
			got[cm.Name] = cm.Data
		}
		var differ []string
		for name, data := range want {
			if !maps.Equal(got[name], data) {
				differ = append(differ, fmt.Sprintf("%s: %v, want %v", name, got[name], data))
			}
		}
		slices.Sort(differ)
		return poll.Done(len(differ) == 0, "%d of %d ConfigMaps differ: %v", len(differ), len(want), differ[:min(len(differ), 5)])
	}
}

// expectConfigMaps fails the test unless every ConfigMap of the Books
// created before the upgrade holds want, at once: by the time this is
// called, every Book is Ready.
func (r *release) expectConfigMaps(t *testing.T, want map[string]map[string]string) {
	t.Helper()
	if err := configMapsHold(r.ns, want)(t.Context()); err != nil {
		t.Error(err)
	}
}

// writeCounter counts the writes of each ConfigMap in a namespace, from a
// watch: a create or an update is one event.
type writeCounter struct {
	ns     string
	mu     sync.Mutex
	writes map[string]int
}

// markers numbers the marker ConfigMaps of every counter.
var markers atomic.Int32

// watchWrites counts the ConfigMap writes in ns from now until the test
// ends.
func watchWrites(t *testing.T, ns string) *writeCounter {
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	list, err := cms.List(t.Context(), metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return cms.Watch(ctx, o)
	}}
	rw, err := watchtools.NewRetryWatcherWithContext(t.Context(), list.ResourceVersion, lw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rw.Stop)
	w := &writeCounter{ns: ns, writes: map[string]int{}}
	go func() {
		for ev := range rw.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				w.mu.Lock()
				w.writes[cm.Name]++
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// sync returns once the counter has seen every write made before it was
// called: it writes a marker ConfigMap, which no Book owns, and waits for
// its event, which the watch delivers after theirs.
func (w *writeCounter) sync(t *testing.T) {
	t.Helper()
	name := fmt.Sprintf("zz-write-marker-%d", markers.Add(1))
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := env.Kube.CoreV1().ConfigMaps(w.ns).Create(t.Context(), marker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the watch to see the marker "+name, func(context.Context) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		return poll.Done(w.writes[name] > 0, "not seen yet")
	})
}

// expect fails the test unless each ConfigMap of stages[0], the data
// before, was written once for each stage after it in which its data
// changed (from the stage before), and at no other time: a stage is what
// one controller, in turn, should have written.
func (w *writeCounter) expect(t *testing.T, stages ...map[string]map[string]string) {
	t.Helper()
	w.sync(t)
	w.mu.Lock()
	defer w.mu.Unlock()
	var wrong []string
	changes, total := 0, 0
	for name := range stages[0] {
		n := 0
		for i := 1; i < len(stages); i++ {
			if !maps.Equal(stages[i-1][name], stages[i][name]) {
				n++
			}
		}
		changes += n
		total += w.writes[name]
		if w.writes[name] != n {
			wrong = append(wrong, fmt.Sprintf("%s: %d writes, want %d", name, w.writes[name], n))
		}
	}
	slices.Sort(wrong)
	t.Logf("ConfigMap writes: %d for %d changes of data in %d ConfigMaps", total, changes, len(stages[0]))
	if len(wrong) > 0 {
		t.Errorf("%d ConfigMaps written other than once per change of their data: %v", len(wrong), wrong[:min(len(wrong), 10)])
	}
}
