//go:build chaos && linux

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

package chaos_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"

	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/test/integration/framework"
)

// Kinds of foreign ConfigMap that take a Book's name.
const (
	noOwner    = "no-owner"    // plain, no owner reference, none of our labels
	otherOwner = "other-owner" // controlled by another ConfigMap, which exists
	ourLabels  = "our-labels"  // our labels, but controlled by another ConfigMap
	forged     = "forged"      // our labels and a Book controller reference with a UID no Book has
)

// TestForeignConfigMaps puts ConfigMaps that others own in the way of a
// share of the Books: with no owner, owned by another object that exists (so
// the garbage collector keeps them), with our labels but another owner, and
// with our labels and a forged owner reference (the Book's name, a wrong
// UID). The controller must never modify any of them (a watch sees every
// change, and data and resourceVersion are compared), their Books report
// ConfigMapConflict (behind a forged one: ConfigMapOfEarlierBook, as the
// garbage collector will delete it), and the rest of the Books converge as
// usual.
//
// kube-controller-manager is down for the first phase, so the garbage
// collector can't remove the forged ConfigMaps before the controller has
// seen them. Back up, it deletes them (their owner does not exist), and
// those Books must create their own. Finally the plain foreign ConfigMaps
// are deleted, and their Books must converge by themselves.
func TestForeignConfigMaps(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	n := config.books
	k := max(2, n/20) // Books per kind of foreign ConfigMap
	kinds := []string{noOwner, otherOwner, ourLabels, forged}
	kindOf := map[string]string{}
	for i, kind := range kinds {
		for j := range k {
			kindOf[bookName("book", i*k+j)] = kind
		}
	}

	if err := env.Cluster.KillControllerManager(); err != nil {
		t.Fatal(err)
	}
	faults.Add(1)
	gcDown := true
	t.Cleanup(func() {
		if gcDown {
			_ = env.Cluster.StartControllerManager(context.Background())
		}
	})

	cms := env.Kube.CoreV1().ConfigMaps(ns)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "someone-elses-app"},
		Data:       map[string]string{"purpose": "owns other ConfigMaps"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	ownerRef := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: &yes}
	var mu sync.Mutex
	foreign := map[string]*corev1.ConfigMap{} // Book name -> the foreign ConfigMap as created
	names := slices.Sorted(maps.Keys(kindOf))
	framework.Parallel(t, len(names), framework.CreateWidth, func(ctx context.Context, i int) error {
		name := names[i]
		kind := kindOf[name]
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Data:       map[string]string{"title": "not the Book's", "kind": kind},
		}
		switch kind {
		case otherOwner:
			cm.Labels = map[string]string{"app.kubernetes.io/managed-by": "someone-else"}
			cm.OwnerReferences = []metav1.OwnerReference{ownerRef}
		case ourLabels:
			cm.Labels = map[string]string{controller.ManagedByLabel: controller.ManagedByValue, controller.BookLabel: name}
			cm.OwnerReferences = []metav1.OwnerReference{ownerRef}
		case forged:
			cm.Labels = map[string]string{controller.ManagedByLabel: controller.ManagedByValue, controller.BookLabel: name}
			cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "webapp.ydzs.io/v2", Kind: "Book", Name: name,
				UID: uuid.NewUUID(), Controller: &yes, BlockOwnerDeletion: &yes}}
		}
		created, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		mu.Lock()
		foreign[name] = created
		mu.Unlock()
		return nil
	})
	foreignUIDs := map[types.UID]string{}
	for name, cm := range foreign {
		foreignUIDs[cm.UID] = name
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changes := watchForeign(t, ns, list.ResourceVersion, foreignUIDs)

	syncs := newSyncLog()
	env.StartController(t, framework.ControllerOptions{Namespace: ns, Observer: syncs})
	want := createBooks(t, ns, "book", n)
	namesOf := func(ks ...string) map[string]bool {
		out := map[string]bool{}
		for name, kind := range kindOf {
			if slices.Contains(ks, kind) {
				out[name] = true
			}
		}
		return out
	}
	uidsOf := func(ks ...string) map[types.UID]bool {
		out := map[types.UID]bool{}
		for name, cm := range foreign {
			if slices.Contains(ks, kindOf[name]) {
				out[cm.UID] = true
			}
		}
		return out
	}
	untouched := func(phase string, ks ...string) {
		t.Helper()
		for name := range namesOf(ks...) {
			got, err := cms.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("%s: foreign ConfigMap %s (%s): %v", phase, name, kindOf[name], err)
				continue
			}
			was := foreign[name]
			if got.UID != was.UID || got.ResourceVersion != was.ResourceVersion || !maps.Equal(got.Data, was.Data) ||
				!maps.Equal(got.Labels, was.Labels) || len(got.OwnerReferences) != len(was.OwnerReferences) {
				t.Errorf("%s: foreign ConfigMap %s (%s) was modified:\nbefore %+v\nafter  %+v", phase, name, kindOf[name], was, got)
			}
		}
	}

	// Phase 1, no garbage collector: every foreign ConfigMap is a conflict,
	// except the forged ones, which wait for the garbage collector.
	phase1 := waitConverged(t, ns, expectation{want: want, conflict: namesOf(noOwner, otherOwner, ourLabels),
		earlier: namesOf(forged), ignore: uidsOf(ourLabels, forged)})
	nudge(t, syncs, ns, slices.Sorted(maps.Keys(namesOf(kinds...))))
	untouched("with the garbage collector down", kinds...)

	// Phase 2: the garbage collector deletes the forged ConfigMaps, whose
	// owner does not exist; their delete events bring their Books back to
	// create their own.
	if err := env.Cluster.StartControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	gcDown = false
	phase2 := waitConverged(t, ns, expectation{want: want, conflict: namesOf(noOwner, otherOwner, ourLabels), ignore: uidsOf(ourLabels)})
	untouched("after garbage collection", noOwner, otherOwner, ourLabels)

	// Phase 3: the plain foreign ConfigMaps go; their Books take the name.
	for name := range namesOf(noOwner) {
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &foreign[name].UID}}); err != nil {
			t.Fatal(err)
		}
	}
	phase3 := waitConverged(t, ns, expectation{want: want, conflict: namesOf(otherOwner, ourLabels), ignore: uidsOf(ourLabels)})
	untouched("at the end", otherOwner, ourLabels)

	modified, deleted := changes()
	for _, m := range modified {
		t.Errorf("foreign ConfigMap %s (%s) was modified", m, kindOf[m])
	}
	for _, d := range deleted {
		if kind := kindOf[d]; kind != forged && kind != noOwner {
			t.Errorf("foreign ConfigMap %s (%s) was deleted", d, kind)
		}
	}
	figure(t, "%d Books, %d of them behind foreign ConfigMaps of 4 kinds: %d modified; all converged (conflicts reported) in %v; "+
		"%d forged ones collected by the restarted garbage collector and replaced in %v; %d names freed and taken in %v",
		n, len(foreign), len(modified), phase1.Round(100*time.Millisecond), k, phase2.Round(100*time.Millisecond), k, phase3.Round(100*time.Millisecond))
}

// watchForeign watches the namespace's ConfigMaps from rv and records every
// modification and deletion of the given foreign ones, until the end of the
// test or until the returned function is called. A RetryWatcher resumes the
// watch from the last resourceVersion whenever the server ends it, so no
// event is missed; should it ever give up, the test fails.
func watchForeign(t *testing.T, ns, rv string, uids map[types.UID]string) (result func() (modified, deleted []string)) {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, configMapWatcher{ns: ns})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	var modified, deleted []string
	var failure string
	go func() {
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				mu.Lock()
				failure = fmt.Sprintf("%s event %#v", ev.Type, ev.Object)
				mu.Unlock()
				continue
			}
			name, isForeign := uids[cm.UID]
			if !isForeign {
				continue
			}
			mu.Lock()
			switch ev.Type {
			case watch.Modified:
				modified = append(modified, name)
			case watch.Deleted:
				deleted = append(deleted, name)
			}
			mu.Unlock()
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			w.Stop()
			<-w.Done()
		})
	}
	t.Cleanup(stop)
	return func() ([]string, []string) {
		stop()
		mu.Lock()
		defer mu.Unlock()
		if failure != "" {
			t.Errorf("the watch on foreign ConfigMaps failed (%s); changes may have been missed", failure)
		}
		return modified, deleted
	}
}

// configMapWatcher is the cache.WatcherWithContext a RetryWatcher needs.
type configMapWatcher struct{ ns string }

func (c configMapWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return env.Kube.CoreV1().ConfigMaps(c.ns).Watch(ctx, opts)
}
