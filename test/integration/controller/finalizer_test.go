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
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/test/integration/framework"
)

// Another controller's finalizer on a Book's ConfigMap (issue 27, item 6):
// it holds the ConfigMap after its deletion was asked for, by the garbage
// collector or by anybody, until that controller removes it. The Book's
// ConfigMap name is taken meanwhile; once the finalizer goes, the API server
// deletes the ConfigMap in the same request, and the Book must get its own
// ConfigMap, with its current spec, on that deletion's event.

// heldBy is the finalizer of "someone else" in these tests.
const heldBy = "example.com/someone-elses"

// freeBound is how soon after the held ConfigMap's deletion the Book's own
// ConfigMap must exist. One watch event and one sync (a create) take well
// under a second on a loaded machine; the conflict recheck, which the tests
// set to an hour, is the only other thing that could end the wait.
const freeBound = 2 * time.Second

// TestRecreatedBookGetsItsConfigMapOnceTheHeldOneGoes follows issue 27 as a
// user did: Book `again` is Ready; its ConfigMap gets someone else's
// finalizer; the Book is deleted, and once the garbage collector has asked
// for the ConfigMap's deletion (deletionTimestamp set, the finalizer holding
// it) the Book is created again. The new Book waits for the earlier Book's
// ConfigMap (ConfigMapOfEarlierBook, no Warning); when the finalizer is
// removed, the new Book's ConfigMap (controlled by the new UID) must exist
// within freeBound.
func TestRecreatedBookGetsItsConfigMapOnceTheHeldOneGoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns, ConflictRecheck: time.Hour})
	books := env.Books.WebappV2().Books(ns)
	cms := env.Kube.CoreV1().ConfigMaps(ns)

	if _, err := books.Create(ctx, framework.NewBook(ns, "again", "first", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "again", metav1.ConditionTrue, "ConfigMapReady")
	hold(t, ns, "again")
	if err := books.Delete(ctx, "again", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	held := env.WaitForConfigMap(t, ns, "again", "to be deleted by the garbage collector and held by "+heldBy,
		func(cm *corev1.ConfigMap) bool { return cm.DeletionTimestamp != nil })
	framework.Eventually(t, "the first Book to be gone", func(ctx context.Context) error {
		_, err := books.Get(ctx, "again", metav1.GetOptions{})
		return poll.Done(apierrors.IsNotFound(err), "Get: %v", err)
	})
	second, err := books.Create(ctx, framework.NewBook(ns, "again", "second", 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "again", metav1.ConditionFalse, "ConfigMapOfEarlierBook")
	if cm, err := cms.Get(ctx, "again", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if cm.UID != held.UID || cm.ResourceVersion != held.ResourceVersion {
		t.Fatalf("the earlier Book's ConfigMap was changed or replaced:\nbefore %+v\nafter  %+v", held, cm)
	}

	converged := releaseAndAwait(t, held, second)
	t.Logf("new Book's ConfigMap %v after the held one's deletion, Ready %v after it",
		converged.configMap.Round(time.Millisecond), converged.ready.Round(time.Millisecond))
	if w := warningEvents(t, ns); len(w) != 0 {
		t.Errorf("Warning events, though nobody had anything to fix: %v", w)
	}
}

// TestBookEditLandsOnceItsHeldConfigMapGoes: someone deletes a Ready Book's
// ConfigMap while a finalizer of theirs holds it, and the Book is edited
// while the ConfigMap waits to go. A ConfigMap being deleted cannot carry
// the edit (the controller recreates rather than repairs it, and an update
// would be lost with the object), so the edit lands in the ConfigMap the
// controller creates once the finalizer is removed: within freeBound of the
// deletion, with the edited data, and the Book Ready for its new
// generation. During the hold the Book says why it is not Ready
// (ConfigMapDeleting) and is not retried: with the recheck at an hour,
// only the deletion's watch event can bring the edit within freeBound.
func TestBookEditLandsOnceItsHeldConfigMapGoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns, ConflictRecheck: time.Hour})
	books := env.Books.WebappV2().Books(ns)
	cms := env.Kube.CoreV1().ConfigMaps(ns)

	if _, err := books.Create(ctx, framework.NewBook(ns, "edited", "before", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "edited", metav1.ConditionTrue, "ConfigMapReady")
	hold(t, ns, "edited")
	if err := cms.Delete(ctx, "edited", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteAsked := time.Now()
	held := env.WaitForConfigMap(t, ns, "edited", "to be deleted and held by "+heldBy,
		func(cm *corev1.ConfigMap) bool { return cm.DeletionTimestamp != nil })

	var book *webappv2.Book
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b, err := books.Get(ctx, "edited", metav1.GetOptions{})
		if err != nil {
			return err
		}
		b.Spec.Title, b.Spec.Price = "after", webappv2.WholePrice(2)
		book, err = books.Update(ctx, b, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The edit's event and its sync come at once; the held ConfigMap must
	// be left as it is all along.
	const heldFor = 3 * time.Second
	env.WaitForReady(t, ns, "edited", metav1.ConditionFalse, "ConfigMapDeleting")
	time.Sleep(time.Until(deleteAsked.Add(heldFor)))
	if b, err := books.Get(ctx, "edited", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if c := meta.FindStatusCondition(b.Status.Conditions, "Ready"); c == nil || c.Reason != "ConfigMapDeleting" || c.ObservedGeneration != b.Generation {
		t.Errorf("during the hold: %s, want Ready=False ConfigMapDeleting for generation %d", framework.DescribeBook(b), b.Generation)
	}
	if cm, err := cms.Get(ctx, "edited", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if cm.UID != held.UID || cm.ResourceVersion != held.ResourceVersion {
		t.Fatalf("the held ConfigMap was changed or replaced while it was being deleted:\nbefore %+v\nafter  %+v", held, cm)
	}

	converged := releaseAndAwait(t, held, book)
	t.Logf("edit in the Book's new ConfigMap %v after the held one's deletion, Ready %v after it",
		converged.configMap.Round(time.Millisecond), converged.ready.Round(time.Millisecond))
}

// hold adds heldBy to the finalizers of the ConfigMap ns/name, and removes
// it again when the test ends, should the test not get that far, so that
// the namespace can go.
func hold(t *testing.T, ns, name string) {
	t.Helper()
	updateFinalizers(t, ns, name, func(f []string) []string { return append(f, heldBy) })
	t.Cleanup(func() {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			return removeFinalizer(context.Background(), ns, name)
		})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("removing %s from ConfigMap %s/%s: %v", heldBy, ns, name, err)
		}
	})
}

// updateFinalizers changes the finalizers of the ConfigMap ns/name.
func updateFinalizers(t *testing.T, ns, name string, change func([]string) []string) {
	t.Helper()
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Finalizers = change(cm.Finalizers)
		_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatalf("changing the finalizers of ConfigMap %s/%s: %v", ns, name, err)
	}
}

// removeFinalizer removes heldBy from the ConfigMap ns/name if it is there.
func removeFinalizer(ctx context.Context, ns, name string) error {
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil || !slices.Contains(cm.Finalizers, heldBy) {
		return err
	}
	cm.Finalizers = slices.DeleteFunc(cm.Finalizers, func(f string) bool { return f == heldBy })
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// convergence is how long after the held ConfigMap's deletion the Book's
// own ConfigMap existed and the Book was Ready.
type convergence struct {
	configMap, ready time.Duration
}

// releaseAndAwait removes heldBy from held, which is being deleted, so that
// the API server deletes it, and waits until book's ConfigMap exists with
// book's spec, controlled by book, and book is Ready for its generation.
// The test fails if that ConfigMap took longer than freeBound.
func releaseAndAwait(t *testing.T, held *corev1.ConfigMap, book *webappv2.Book) convergence {
	t.Helper()
	ctx := context.Background()
	ns, name := held.Namespace, held.Name
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	// The update that removes the last finalizer of an object being
	// deleted deletes it before the API server answers.
	if err := removeFinalizer(ctx, ns, name); err != nil {
		t.Fatalf("removing %s from ConfigMap %s/%s: %v", heldBy, ns, name, err)
	}
	deleted := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			logWrites(t, ns, name, deleted)
		}
	})
	want := map[string]string{"title": book.Spec.Title, "price": strconv.Itoa(int(book.Spec.Price.WholeUnits()))}
	var got convergence
	poll.Eventually(t, fmt.Sprintf("the Book's own ConfigMap (want within %v of the held one's deletion)", freeBound),
		20*time.Millisecond, 5*freeBound, func(ctx context.Context) error {
			cm, err := cms.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.UID == held.UID {
				return poll.Stop(fmt.Errorf("the held ConfigMap is still there after its last finalizer was removed: %+v", cm))
			}
			if !metav1.IsControlledBy(cm, book) || cm.Data["title"] != want["title"] || cm.Data["price"] != want["price"] {
				return fmt.Errorf("ConfigMap %s: data %v, owners %v", cm.UID, cm.Data, cm.OwnerReferences)
			}
			got.configMap = time.Since(deleted)
			return nil
		})
	if got.configMap > freeBound {
		t.Errorf("the Book's ConfigMap appeared %v after the held one's deletion, want within %v",
			got.configMap.Round(time.Millisecond), freeBound)
	}
	framework.Eventually(t, "the Book to be Ready", func(ctx context.Context) error {
		b, err := env.Books.WebappV2().Books(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, "Ready")
		if c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == b.Generation {
			got.ready = time.Since(deleted)
			return nil
		}
		return errors.New(framework.DescribeBook(b))
	})
	return got
}

// logWrites logs, from the API server's audit log, every write of the Book
// and of the ConfigMap ns/name, by anyone, with its time relative to the
// held ConfigMap's deletion: what a failure must be explained from.
func logWrites(t *testing.T, ns, name string, deleted time.Time) {
	t.Helper()
	for _, e := range env.AuditLog(t) {
		ref := e.ObjectRef
		if ref == nil || ref.Namespace != ns || ref.Name != name || (ref.Resource != "configmaps" && ref.Resource != "books") {
			continue
		}
		code := int32(0)
		if e.ResponseStatus != nil {
			code = e.ResponseStatus.Code
		}
		resource := ref.Resource
		if ref.Subresource != "" {
			resource += "/" + ref.Subresource
		}
		// The controller runs as its ServiceAccount, by impersonation.
		who := e.User.Username
		if e.ImpersonatedUser != nil {
			who = e.ImpersonatedUser.Username
		}
		t.Logf("audit %+8.3fs %s %s %s (%d) by %s", e.RequestReceivedTimestamp.Sub(deleted).Seconds(),
			e.Verb, resource, name, code, who)
	}
}

// warningEvents lists the Warning events in ns.
func warningEvents(t *testing.T, ns string) []string {
	t.Helper()
	events, err := env.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range events.Items {
		if ev.Type == corev1.EventTypeWarning {
			out = append(out, ev.Reason+": "+ev.Note)
		}
	}
	return out
}
