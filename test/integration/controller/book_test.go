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
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/test/integration/framework"
)

func TestCreateMakesOwnedConfigMapAndReadyStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns})

	book, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, "book-sample", "kubernetes", 100), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := env.WaitForReady(t, ns, "book-sample", metav1.ConditionTrue, "ConfigMapReady")
	if got.Status.ObservedGeneration != book.Generation || got.Status.ConfigMapName != "book-sample" {
		t.Errorf("status = %+v, want observedGeneration %d and configMapName book-sample", got.Status, book.Generation)
	}

	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "book-sample", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["title"] != "kubernetes" || cm.Data["price"] != "100" || len(cm.Data) != 2 {
		t.Errorf("ConfigMap data = %v, want title=kubernetes price=100", cm.Data)
	}
	if cm.Labels["app.kubernetes.io/managed-by"] != "book-controller" || cm.Labels["webapp.ydzs.io/book"] != "book-sample" {
		t.Errorf("ConfigMap labels = %v", cm.Labels)
	}
	ref := metav1.GetControllerOf(cm)
	if ref == nil || ref.UID != book.UID || ref.Kind != "Book" || ref.APIVersion != "webapp.ydzs.io/v2" ||
		ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("ConfigMap controller reference = %+v, want a blocking controller reference to Book UID %s", ref, book.UID)
	}
	env.WaitForEvent(t, ns, "book-sample", corev1.EventTypeNormal, "ConfigMapCreated")
}

func TestSpecUpdateUpdatesConfigMapAndObservedGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns})

	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, "b", "first", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	book := env.WaitForReady(t, ns, "b", metav1.ConditionTrue, "ConfigMapReady")

	book.Spec.Title, book.Spec.Price = "second edition", webappv2.WholePrice(2)
	updated, err := env.Books.WebappV2().Books(ns).Update(ctx, book, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Generation <= book.Generation {
		t.Fatalf("generation did not advance on a spec update: %d -> %d", book.Generation, updated.Generation)
	}
	env.WaitForConfigMap(t, ns, "b", "to hold the new spec", func(cm *corev1.ConfigMap) bool {
		return cm.Data["title"] == "second edition" && cm.Data["price"] == "2"
	})
	got := env.WaitForReady(t, ns, "b", metav1.ConditionTrue, "ConfigMapReady")
	if got.Status.ObservedGeneration != updated.Generation {
		t.Errorf("observedGeneration = %d, want %d", got.Status.ObservedGeneration, updated.Generation)
	}
	env.WaitForEvent(t, ns, "b", corev1.EventTypeNormal, "ConfigMapUpdated")
}

func TestConfigMapEditedOrDeletedIsRestored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns})
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, "b", "title", 7), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "b", metav1.ConditionTrue, "ConfigMapReady")
	restored := func(cm *corev1.ConfigMap) bool {
		return cm.Data["title"] == "title" && cm.Data["price"] == "7" && len(cm.Data) == 2 &&
			cm.Labels["app.kubernetes.io/managed-by"] == "book-controller"
	}

	t.Run("edited", func(t *testing.T) {
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"title": "vandalised", "extra": "x"}
		cm.Labels["team"] = "someone-else"
		cm.Annotations = map[string]string{"note": "kept"}
		if _, err := env.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		got := env.WaitForConfigMap(t, ns, "b", "restored after an edit", restored)
		if got.Labels["team"] != "someone-else" {
			t.Errorf("a label added by someone else was removed: %v", got.Labels)
		}
		// The controller's cache keeps only part of a ConfigMap; the repair
		// must start from the whole object, or it would drop this.
		if got.Annotations["note"] != "kept" {
			t.Errorf("an annotation added by someone else was removed: %v", got.Annotations)
		}
	})

	t.Run("labels stripped", func(t *testing.T) {
		// Without our label the ConfigMap leaves the controller's filtered
		// cache; the controller must still find it, see it is its own, and
		// put the labels back rather than report a conflict.
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Labels = nil
		cm.Data["price"] = "8"
		if _, err := env.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitForConfigMap(t, ns, "b", "restored after its labels were removed", restored)
	})

	t.Run("deleted", func(t *testing.T) {
		old, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitForConfigMap(t, ns, "b", "recreated after deletion", func(cm *corev1.ConfigMap) bool {
			return cm.UID != old.UID && restored(cm)
		})
	})
}

func TestForeignConfigMapIsLeftAloneAndReported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns, Labels: map[string]string{"owner": "someone-else"}},
		Data:       map[string]string{"title": "not yours", "config": "important"},
	}
	foreign, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, foreign, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.StartController(t, framework.ControllerOptions{Namespace: ns})
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, "taken", "mine", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	env.WaitForReady(t, ns, "taken", metav1.ConditionFalse, "ConfigMapConflict")
	env.WaitForEvent(t, ns, "taken", corev1.EventTypeWarning, "ConfigMapConflict")
	after, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "taken", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != foreign.ResourceVersion || !maps.Equal(after.Data, foreign.Data) ||
		!maps.Equal(after.Labels, foreign.Labels) || len(after.OwnerReferences) != 0 {
		t.Errorf("foreign ConfigMap was modified:\nbefore %+v\nafter  %+v", foreign, after)
	}

	// Once the name is free, the Book converges on its own.
	if err := env.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "taken", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "taken", metav1.ConditionTrue, "ConfigMapReady")
	env.WaitForConfigMap(t, ns, "taken", "to be the Book's", func(cm *corev1.ConfigMap) bool {
		return cm.Data["title"] == "mine" && metav1.GetControllerOf(cm) != nil
	})
}

// TestForgedOwnerReferenceIsNotAdopted: a ConfigMap with our labels and a
// controller reference naming the Book, but with another UID, is not the
// Book's. The real garbage collector deletes it (its owner UID does not
// exist); until then the controller must not modify it, and afterwards it
// must create its own.
func TestForgedOwnerReferenceIsNotAdopted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	yes := true
	forged := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: "forged", Namespace: ns,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "book-controller", "webapp.ydzs.io/book": "forged"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "webapp.ydzs.io/v2", Kind: "Book", Name: "forged",
				UID: "00000000-0000-0000-0000-000000000000", Controller: &yes,
			}},
		},
		Data: map[string]string{"title": "forged", "price": "0"},
	}
	forged, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, forged, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := env.Kube.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=forged", ResourceVersion: forged.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()

	env.StartController(t, framework.ControllerOptions{Namespace: ns})
	book, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, "forged", "real", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	timeout := time.After(framework.Timeout)
	for {
		select {
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				t.Fatal("watch closed before the Book got its own ConfigMap")
			}
			cm, isCM := ev.Object.(*corev1.ConfigMap)
			if !isCM {
				continue
			}
			if cm.UID == forged.UID && ev.Type == watch.Modified {
				t.Fatalf("the ConfigMap with a forged owner reference was modified: %+v", cm)
			}
			if cm.UID != forged.UID && ev.Type == watch.Added {
				if !metav1.IsControlledBy(cm, book) || cm.Data["title"] != "real" {
					t.Fatalf("new ConfigMap is not the Book's: %+v", cm)
				}
				env.WaitForReady(t, ns, "forged", metav1.ConditionTrue, "ConfigMapReady")
				return
			}
		case <-timeout:
			t.Fatal("timed out waiting for the forged ConfigMap to be collected and the Book's own to appear")
		}
	}
}

func TestDeletedBookConfigMapIsGarbageCollected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns})
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, "gone", "t", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "gone", metav1.ConditionTrue, "ConfigMapReady")
	if err := env.Books.WebappV2().Books(ns).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Nothing in this repository deletes ConfigMaps: only the real garbage
	// collector in kube-controller-manager can make this pass.
	env.WaitForConfigMapGone(t, ns, "gone")
}

func TestNamespaceModeIgnoresOtherNamespaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	watched, other := env.Namespace(t), env.Namespace(t)
	env.StartController(t, framework.ControllerOptions{Namespace: watched})
	if _, err := env.Books.WebappV2().Books(other).Create(ctx, framework.NewBook(other, "ignored", "t", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Books.WebappV2().Books(watched).Create(ctx, framework.NewBook(watched, "seen", "t", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Book in the other namespace was created first; once the watched
	// one is Ready, the controller has had every chance to touch it.
	env.WaitForReady(t, watched, "seen", metav1.ConditionTrue, "ConfigMapReady")
	book, err := env.Books.WebappV2().Books(other).Get(ctx, "ignored", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(book.Status.Conditions) != 0 || book.Status.ObservedGeneration != 0 {
		t.Errorf("Book outside --namespace got a status: %+v", book.Status)
	}
	cms, err := env.Kube.CoreV1().ConfigMaps(other).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=book-controller"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != 0 {
		t.Errorf("controller wrote %d ConfigMaps outside --namespace", len(cms.Items))
	}
}
