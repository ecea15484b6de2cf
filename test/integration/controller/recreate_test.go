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

package controller_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/localcluster"
	"ydzs.io/book-controller/test/integration/framework"
)

// TestRecreatedBookIsReadyWhenTheEarlierConfigMapGoes: a Book is deleted and
// created again with the same name before the garbage collector has
// removed the first Book's ConfigMap. The new Book must report that it
// waits for the garbage collector (no conflict, no Warning), and be Ready
// within 2 s of that ConfigMap's deletion: its delete event enqueues the
// Book of its name, whatever UID its owner reference carries. (When the
// handler dropped events whose owner UID was not the live Book's, the Book
// stayed not Ready until the conflict recheck, 30 s by default; here an
// hour, so only the event can make the test pass.)
//
// Not parallel: it stops kube-controller-manager, whose garbage collector
// other tests need. Go runs the parallel tests of a package only after
// every sequential one has returned.
func TestRecreatedBookIsReadyWhenTheEarlierConfigMapGoes(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns, ConflictRecheck: time.Hour})
	books := env.Books.WebappV2().Books(ns)

	first, err := books.Create(ctx, framework.NewBook(ns, "again", "first", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "again", metav1.ConditionTrue, "ConfigMapReady")
	earlier, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "again", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Stop the garbage collector, delete the Book and create it again.
	if err := env.Cluster.KillControllerManager(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, running := env.Cluster.Pids()[localcluster.KubeControllerManager]; !running {
			if err := env.Cluster.StartControllerManager(context.Background()); err != nil {
				t.Errorf("restarting kube-controller-manager: %v", err)
			}
		}
	})
	if err := books.Delete(ctx, "again", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the first Book to be gone", func(ctx context.Context) error {
		b, err := books.Get(ctx, "again", metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("Book %s exists, deletionTimestamp %v", b.UID, b.DeletionTimestamp)
		}
		return poll.Done(apierrors.IsNotFound(err), "%v", err)
	})
	second, err := books.Create(ctx, framework.NewBook(ns, "again", "second", 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if second.UID == first.UID {
		t.Fatalf("the recreated Book has the first one's UID %s", first.UID)
	}

	got := env.WaitForReady(t, ns, "again", metav1.ConditionFalse, "ConfigMapOfEarlierBook")
	t.Logf("waiting: %s", meta.FindStatusCondition(got.Status.Conditions, "Ready").Message)
	if cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "again", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if cm.UID != earlier.UID || cm.ResourceVersion != earlier.ResourceVersion {
		t.Fatalf("the earlier Book's ConfigMap was changed or replaced:\nbefore %+v\nafter  %+v", earlier, cm)
	}

	// Start the garbage collector again and note when the earlier
	// ConfigMap is gone.
	watcher, err := env.Kube.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=again", ResourceVersion: earlier.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	if err := env.Cluster.StartControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	var deleted time.Time
	timeout := time.After(framework.Timeout)
	for deleted.IsZero() {
		select {
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				t.Fatal("watch closed before the earlier ConfigMap was deleted")
			}
			if cm, isCM := ev.Object.(*corev1.ConfigMap); isCM && ev.Type == watch.Deleted && cm.UID == earlier.UID {
				deleted = time.Now()
			}
		case <-timeout:
			t.Fatal("timed out waiting for the garbage collector to delete the earlier Book's ConfigMap")
		}
	}

	// One watch event and one sync (a create and a status write) take well
	// under a second even on a loaded machine; 2 s leaves room for that and
	// is still far from the recheck that would otherwise end the wait.
	const bound = 2 * time.Second
	var readyAfter time.Duration
	poll.Eventually(t, fmt.Sprintf("the Book to be Ready (want within %v of the earlier ConfigMap's deletion)", bound),
		20*time.Millisecond, time.Until(deleted.Add(5*bound)), func(ctx context.Context) error {
			b, err := books.Get(ctx, "again", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c := meta.FindStatusCondition(b.Status.Conditions, "Ready")
			if c != nil && c.Status == metav1.ConditionTrue && c.Reason == "ConfigMapReady" && c.ObservedGeneration == b.Generation {
				readyAfter = time.Since(deleted)
				return nil
			}
			return errors.New(framework.DescribeBook(b))
		})
	t.Logf("Ready %v after the earlier ConfigMap's deletion", readyAfter.Round(time.Millisecond))
	if readyAfter > bound {
		t.Errorf("Book Ready %v after the earlier ConfigMap's deletion, want within %v", readyAfter.Round(time.Millisecond), bound)
	}
	cm := env.WaitForConfigMap(t, ns, "again", "to be the new Book's", func(cm *corev1.ConfigMap) bool {
		return metav1.IsControlledBy(cm, second)
	})
	if cm.Data["title"] != "second" || cm.Data["price"] != "2" {
		t.Errorf("new ConfigMap data = %v, want title=second price=2", cm.Data)
	}

	// A Book that waits for the garbage collector is not in conflict:
	// nobody has anything to fix, so no Warning.
	events, err := env.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		if ev.Type == corev1.EventTypeWarning {
			t.Errorf("Warning event %s: %s", ev.Reason, ev.Note)
		}
	}
}
