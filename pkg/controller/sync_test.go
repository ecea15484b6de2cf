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
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

const (
	eventCreated  = "Normal ConfigMapCreated Created ConfigMap "
	eventUpdated  = "Normal ConfigMapUpdated Updated ConfigMap "
	eventConflict = "Warning ConfigMapConflict ConfigMap "
)

func TestSyncCreatesConfigMapAndReportsReady(t *testing.T) {
	book := newBook("demo", 3, "Go in Action", 42)
	f := newFixture(t, Options{}, book)

	f.mustSync("demo")

	f.expectConfigMapMatches(book)
	cond := f.expectReady("demo", metav1.ConditionTrue, ReasonConfigMapReady)
	if !cond.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("Ready.lastTransitionTime: got %v, want %v", cond.LastTransitionTime, t0)
	}
	if got := f.getBook("demo").Status.ObservedGeneration; got != 3 {
		t.Errorf("status.observedGeneration: got %d, want 3", got)
	}
	f.expectEvents(eventCreated + "demo")

	if n := len(filterActions(f.kubeClient.Actions(), "create", "configmaps", "-")); n != 1 {
		t.Errorf("ConfigMap creates: got %d, want 1", n)
	}
	if n := len(f.statusWrites()); n != 1 {
		t.Errorf("status writes: got %d, want 1", n)
	}
	if n := len(f.writes()); n != 2 {
		t.Errorf("writes: got %d, want 2: %s", n, describeActions(f.writes()))
	}
	// The status goes through the status subresource, never the main resource.
	if n := len(filterActions(f.bookClient.Actions(), "update", "books", "-")); n != 0 {
		t.Errorf("Book main-resource updates: got %d, want 0", n)
	}
}

func TestSyncUpdatesConfigMapWhenSpecChanges(t *testing.T) {
	old := newBook("demo", 1, "Old Title", 10)
	cm := ownConfigMap(old)
	// The user edited the spec: the generation moved on, the status did not.
	book := withReadyStatus(old, t0)
	book.Generation = 2
	book.Spec = webappv2.BookSpec{Title: "New Title", Price: webappv2.WholePrice(25)}
	f := newFixture(t, Options{}, book, cm)
	f.clock.Step(time.Minute)

	f.mustSync("demo")

	f.expectConfigMapMatches(book)
	cond := f.expectReady("demo", metav1.ConditionTrue, ReasonConfigMapReady)
	if !cond.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("Ready stayed True, so its lastTransitionTime must stay %v; got %v", t0, cond.LastTransitionTime)
	}
	if got := f.getBook("demo").Status.ObservedGeneration; got != 2 {
		t.Errorf("status.observedGeneration: got %d, want 2", got)
	}
	f.expectEvents(eventUpdated + "demo")
	if n := len(filterActions(f.kubeClient.Actions(), "update", "configmaps", "-")); n != 1 {
		t.Errorf("ConfigMap updates: got %d, want 1", n)
	}
	if n := len(filterActions(f.kubeClient.Actions(), "create", "configmaps", "")); n != 0 {
		t.Errorf("ConfigMap creates: got %d, want 0", n)
	}
}

func TestSyncConvergedBookMakesNoWrites(t *testing.T) {
	book := withReadyStatus(newBook("demo", 4, "Converged", 7), t0)
	cm := ownConfigMap(book)
	// Others may add labels, annotations and owner references; that is no
	// reason to write.
	cm.Labels["team"] = "books"
	cm.Annotations = map[string]string{"note": "hello"}
	f := newFixture(t, Options{}, book, cm)
	before := f.mustGetConfigMap("demo")
	f.clock.Step(time.Hour) // a later resync must not restamp anything

	for range 3 {
		f.mustSync("demo")
	}

	f.expectNoWrites()
	f.expectEvents()
	if after := f.mustGetConfigMap("demo"); !apiequality.Semantic.DeepEqual(before, after) {
		t.Errorf("ConfigMap changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

func TestSyncRepairsEditedConfigMap(t *testing.T) {
	book := withReadyStatus(newBook("demo", 2, "The Title", 30), t0)
	cm := ownConfigMap(book)
	cm.Data[TitleKey] = "vandalised"
	cm.Data["extra"] = "should go"
	delete(cm.Labels, BookLabel)
	cm.Labels["team"] = "books"
	cm.Annotations = map[string]string{"note": "kept"}
	cm.BinaryData = map[string][]byte{"blob": []byte{1, 2, 3}}
	f := newFixture(t, Options{}, book, cm)
	cachedBefore, _, _ := f.configMapIndexer().GetByKey("default/demo")
	cachedCopy := *cachedBefore.(*cachedConfigMap)

	f.mustSync("demo")

	// The cache keeps only part of the ConfigMap, and an update replaces
	// all of it: one live read gets the rest. (Counted before the test's
	// own reads.)
	if n := len(filterActions(f.kubeClient.Actions(), "get", "configmaps", "")); n != 1 {
		t.Errorf("live ConfigMap reads: got %d, want 1", n)
	}
	got := f.expectConfigMapMatches(book)
	if got.Labels["team"] != "books" {
		t.Errorf("foreign label dropped: labels %v", got.Labels)
	}
	if got.Annotations["note"] != "kept" {
		t.Errorf("foreign annotation dropped: annotations %v", got.Annotations)
	}
	if len(got.OwnerReferences) != 1 {
		t.Errorf("owner references: got %v", got.OwnerReferences)
	}
	f.expectEvents(eventUpdated + "demo")
	if n := len(filterActions(f.kubeClient.Actions(), "update", "configmaps", "-")); n != 1 {
		t.Errorf("ConfigMap updates: got %d, want 1", n)
	}
	// The status was already right.
	if n := len(f.statusWrites()); n != 0 {
		t.Errorf("status writes: got %d, want 0", n)
	}
	f.expectReady("demo", metav1.ConditionTrue, ReasonConfigMapReady)
	// The object in the informer cache is shared; the controller must not
	// have changed it in place.
	cachedAfter, _, _ := f.configMapIndexer().GetByKey("default/demo")
	if !reflect.DeepEqual(&cachedCopy, cachedAfter) {
		t.Errorf("cached ConfigMap mutated:\nbefore %+v\nafter  %+v", cachedCopy, cachedAfter)
	}

	// Once the watch delivers the repaired object, nothing more happens.
	f.feedBackConfigMap("demo")
	f.clearActions()
	f.mustSync("demo")
	f.expectNoWrites()
	f.expectEvents()
}

func TestSyncRecreatesDeletedConfigMap(t *testing.T) {
	book := withReadyStatus(newBook("demo", 1, "Recreate Me", 5), t0)
	f := newFixture(t, Options{}, book) // the ConfigMap is gone from server and cache

	f.mustSync("demo")

	f.expectConfigMapMatches(book)
	f.expectEvents(eventCreated + "demo")
	// Ready was True and stays True, so the status needs no write.
	if n := len(f.statusWrites()); n != 0 {
		t.Errorf("status writes: got %d, want 0", n)
	}
}

// TestSyncLeavesForeignConfigMapAlone covers ConfigMaps that carry the Book's
// name but that the Book does not control: they must be left exactly as they
// are, and the Book reports a conflict, once. One controlled by an earlier
// Book of the same name is no conflict: the Book reports that it waits for
// the garbage collector, with no Warning.
func TestSyncLeavesForeignConfigMapAlone(t *testing.T) {
	book := newBook("demo", 1, "Mine", 1)
	deployRef := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "uid-web", Controller: ptrTo(true)}

	tests := []struct {
		name   string
		cm     *corev1.ConfigMap
		reason string // ReasonConfigMapConflict unless set
	}{{
		name: "no owner, no labels (outside the cache)",
		cm: &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: testNamespace, Labels: map[string]string{"app": "other"}},
			Data:       map[string]string{"key": "value"},
		},
	}, {
		name: "controlled by a Deployment (outside the cache)",
		cm: &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: testNamespace, OwnerReferences: []metav1.OwnerReference{deployRef}},
			Data:       map[string]string{TitleKey: "theirs"},
		},
	}, {
		name: "controlled by a Deployment but carrying our labels (in the cache)",
		cm: &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: "demo", Namespace: testNamespace,
				Labels:          map[string]string{ManagedByLabel: ManagedByValue, BookLabel: "demo"},
				OwnerReferences: []metav1.OwnerReference{deployRef},
			},
			Data: map[string]string{TitleKey: "theirs"},
		},
	}, {
		name: "owned but not controlled by the Book (in the cache)",
		cm: func() *corev1.ConfigMap {
			cm := ownConfigMap(book)
			cm.OwnerReferences[0].Controller = nil
			cm.Data[TitleKey] = "stale"
			return cm
		}(),
	}, {
		name: "controller reference with the Book's name and kind but another UID (in the cache)",
		cm: func() *corev1.ConfigMap {
			cm := ownConfigMap(book)
			cm.OwnerReferences = []metav1.OwnerReference{bookControllerRef("demo", "uid-of-a-deleted-book")}
			cm.Data[TitleKey] = "stale"
			return cm
		}(),
		reason: ReasonConfigMapOfEarlierBook,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{}, book, tt.cm)
			before := f.mustGetConfigMap("demo")
			expectUntouched := func() {
				t.Helper()
				if after := f.getConfigMap("demo"); !apiequality.Semantic.DeepEqual(before, after) {
					t.Errorf("foreign ConfigMap changed:\nbefore %+v\nafter  %+v", before, after)
				}
				for _, verb := range []string{"update", "patch", "delete"} {
					if a := filterActions(f.kubeClient.Actions(), verb, "configmaps", ""); len(a) != 0 {
						t.Errorf("%s on the foreign ConfigMap: %s", verb, describeActions(a))
					}
				}
			}

			reason, warnings := ReasonConfigMapConflict, []string{eventConflict + "demo exists and is not controlled by this Book"}
			if tt.reason != "" {
				reason, warnings = tt.reason, nil
			}
			f.mustSync("demo")

			expectUntouched()
			cond := f.expectReady("demo", metav1.ConditionFalse, reason)
			if !cond.LastTransitionTime.Time.Equal(t0) {
				t.Errorf("Ready.lastTransitionTime: got %v, want %v", cond.LastTransitionTime, t0)
			}
			f.expectEvents(warnings...)
			if n := len(f.statusWrites()); n != 1 {
				t.Errorf("status writes: got %d, want 1", n)
			}

			// The recheck: same world, status already says so. No second
			// Warning, no status write, still untouched.
			f.feedBackBook("demo")
			f.clearActions()
			f.clock.Step(time.Minute)
			f.mustSync("demo")
			expectUntouched()
			f.expectEvents()
			if n := len(f.statusWrites()); n != 0 {
				t.Errorf("status writes on recheck: got %d, want 0", n)
			}
			f.expectReady("demo", metav1.ConditionFalse, reason)

			// The owner of the foreign ConfigMap removes it: the Book converges.
			if err := f.kubeClient.CoreV1().ConfigMaps(testNamespace).Delete(t.Context(), "demo", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			f.feedBackConfigMap("demo")
			f.clock.Step(time.Minute)
			f.clearActions()
			f.mustSync("demo")

			f.expectConfigMapMatches(book)
			cond = f.expectReady("demo", metav1.ConditionTrue, ReasonConfigMapReady)
			if want := t0.Add(2 * time.Minute); !cond.LastTransitionTime.Time.Equal(want) {
				t.Errorf("Ready.lastTransitionTime after the flip: got %v, want %v", cond.LastTransitionTime, want)
			}
			f.expectEvents(eventCreated + "demo")
		})
	}
}

// TestSyncConflictWarnsOncePerEpisode: a status write while the conflict
// lasts (here for a new generation) must not repeat the Warning; a Book that
// was Ready and runs into a conflict gets one.
func TestSyncConflictWarnsOncePerEpisode(t *testing.T) {
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: testNamespace}}

	t.Run("spec edited during a conflict", func(t *testing.T) {
		book := newBook("demo", 1, "Mine", 1)
		book.Status = computeStatus(book, conflictCondition(book), t0)
		book.Generation = 2
		book.Spec.Title = "Edited"
		f := newFixture(t, Options{}, book, foreign)

		f.mustSync("demo")

		if n := len(f.statusWrites()); n != 1 {
			t.Errorf("status writes: got %d, want 1 (the new observedGeneration)", n)
		}
		cond := f.expectReady("demo", metav1.ConditionFalse, ReasonConfigMapConflict)
		if !cond.LastTransitionTime.Time.Equal(t0) {
			t.Errorf("lastTransitionTime: got %v, want %v", cond.LastTransitionTime, t0)
		}
		f.expectEvents()
	})
	t.Run("Ready Book runs into a conflict", func(t *testing.T) {
		book := withReadyStatus(newBook("demo", 1, "Mine", 1), t0)
		f := newFixture(t, Options{}, book, foreign)

		f.mustSync("demo")

		f.expectReady("demo", metav1.ConditionFalse, ReasonConfigMapConflict)
		f.expectEvents(eventConflict + "demo")
	})
}

// TestSyncConflictIsRechecked: the foreign ConfigMap is outside the cache, so
// nothing will announce its deletion; the Book must be looked at again later.
func TestSyncConflictIsRechecked(t *testing.T) {
	book := newBook("demo", 1, "Mine", 1)
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: testNamespace}}
	f := newFixture(t, Options{ConflictRecheck: 5 * time.Millisecond}, book, foreign)

	res, err := f.syncResult("demo")
	if err != nil {
		t.Fatalf("syncHandler: %v", err)
	}
	if res.RequeueAfter != 5*time.Millisecond {
		t.Errorf("Result %+v, want RequeueAfter 5ms (the conflict recheck)", res)
	}
}

// TestSyncRepairLeavesAConfigMapThatChangedHands: the cache shows our
// ConfigMap with stale data, but by the time the repair reads it whole,
// somebody else controls it. The repair must not write it; the live object
// is judged as a cache hit would be (a conflict, looked at again later).
func TestSyncRepairLeavesAConfigMapThatChangedHands(t *testing.T) {
	book := withReadyStatus(newBook("demo", 1, "Mine", 1), t0)
	cm := ownConfigMap(book)
	cm.Data[TitleKey] = "edited"
	f := newFixture(t, Options{ConflictRecheck: time.Minute}, book, cm)
	taken := f.mustGetConfigMap("demo")
	taken.OwnerReferences = []metav1.OwnerReference{bookControllerRef("other", "other-uid")}
	if _, err := f.kubeClient.CoreV1().ConfigMaps(testNamespace).Update(t.Context(), taken, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.clearActions()

	res, err := f.syncResult("demo")

	if err != nil || res.RequeueAfter != time.Minute {
		t.Errorf("sync: got %+v, %v; want RequeueAfter 1m (the conflict recheck) and no error", res, err)
	}
	if n := len(filterActions(f.kubeClient.Actions(), "update", "configmaps", "-")); n != 0 {
		t.Errorf("ConfigMap updates: got %d, want 0", n)
	}
	if got := f.mustGetConfigMap("demo"); got.Data[TitleKey] != "edited" || !metav1.IsControlledBy(got, &webappv2.Book{ObjectMeta: metav1.ObjectMeta{UID: "other-uid"}}) {
		t.Errorf("the ConfigMap somebody else controls was changed: %+v", got)
	}
	f.expectReady("demo", metav1.ConditionFalse, ReasonConfigMapConflict)
	f.expectEvents(eventConflict + "demo")
}

// TestSyncRepairsLabelStrippedConfigMap: somebody removed our labels, so the
// ConfigMap left the filtered cache; Create answers AlreadyExists and the
// live read shows it is ours.
func TestSyncRepairsLabelStrippedConfigMap(t *testing.T) {
	book := withReadyStatus(newBook("demo", 1, "Stripped", 9), t0)
	cm := ownConfigMap(book)
	cm.Labels = map[string]string{"team": "books"}
	f := newFixture(t, Options{}, book, cm)
	if cached, err := f.c.configMaps.get(testNamespace, "demo"); cached != nil || err != nil {
		t.Fatalf("precondition: a ConfigMap without our label must not be in the cache, got %+v, err=%v", cached, err)
	}

	f.mustSync("demo")

	// Count the actions before the test's own reads add to them.
	creates := filterActions(f.kubeClient.Actions(), "create", "configmaps", "-")
	if len(creates) != 1 {
		t.Errorf("ConfigMap create attempts: got %d, want 1", len(creates))
	}
	if n := len(filterActions(f.kubeClient.Actions(), "get", "configmaps", "")); n != 1 {
		t.Errorf("live ConfigMap reads: got %d, want 1", n)
	}
	if n := len(filterActions(f.kubeClient.Actions(), "update", "configmaps", "-")); n != 1 {
		t.Errorf("ConfigMap updates: got %d, want 1", n)
	}
	if n := len(f.statusWrites()); n != 0 {
		t.Errorf("status writes: got %d, want 0", n)
	}
	got := f.expectConfigMapMatches(book)
	if got.Labels["team"] != "books" {
		t.Errorf("foreign label dropped: %v", got.Labels)
	}
	f.expectEvents(eventUpdated + "demo")
	f.expectReady("demo", metav1.ConditionTrue, ReasonConfigMapReady)
}

func TestSyncWritesStatusOnce(t *testing.T) {
	book := newBook("demo", 1, "Once", 1)
	f := newFixture(t, Options{}, book)

	f.mustSync("demo")
	if n := len(f.statusWrites()); n != 1 {
		t.Fatalf("first sync: status writes %d, want 1", n)
	}
	f.events()

	// The watch delivers what we wrote; time passes; a resync follows.
	f.feedBackBook("demo")
	f.feedBackConfigMap("demo")
	f.clock.Step(90 * time.Second)
	f.clearActions()
	f.mustSync("demo")

	f.expectNoWrites()
	f.expectEvents()
}

func TestSyncBookGone(t *testing.T) {
	f := newFixture(t, Options{})
	if err := f.sync("missing"); err != nil {
		t.Fatalf("syncHandler: got %v, want nil", err)
	}
	f.expectNoWrites()
	f.expectEvents()
}

func TestSyncBookBeingDeleted(t *testing.T) {
	book := newBook("demo", 1, "Going", 1)
	now := metav1.NewTime(t0)
	book.DeletionTimestamp = &now
	book.Finalizers = []string{"example.com/hold"}
	f := newFixture(t, Options{}, book)

	if err := f.sync("demo"); err != nil {
		t.Fatalf("syncHandler: %v", err)
	}
	f.expectNoWrites()
	f.expectEvents()
}

func TestSyncReturnsAPIErrors(t *testing.T) {
	t.Run("create fails", func(t *testing.T) {
		f := newFixture(t, Options{}, newBook("demo", 1, "T", 1))
		f.kubeClient.PrependReactor("create", "configmaps", func(core.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewInternalError(errors.New("boom"))
		})
		err := f.sync("demo")
		if !apierrors.IsInternalError(err) {
			t.Fatalf("syncHandler: got %v, want the wrapped InternalError", err)
		}
		if n := len(f.statusWrites()); n != 0 {
			t.Errorf("status writes after a failed create: got %d, want 0", n)
		}
		f.expectEvents()
	})
	t.Run("status write conflicts", func(t *testing.T) {
		f := newFixture(t, Options{}, newBook("demo", 1, "T", 1))
		f.bookClient.PrependReactor("update", "books", func(a core.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "status" {
				return false, nil, nil
			}
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: webappv2.GroupName, Resource: "books"}, "demo", errors.New("stale"))
		})
		err := f.sync("demo")
		if !apierrors.IsConflict(err) {
			t.Fatalf("syncHandler: got %v, want a Conflict that processNextWorkItem can recognise", err)
		}
	})
}

func ptrTo[T any](v T) *T { return &v }

// TestSyncLeavesItsConfigMapWhileAFinalizerHoldsIt: somebody deleted the
// Book's ConfigMap and their finalizer holds it, and the Book is edited
// meanwhile. Nothing is written into the ConfigMap on its way out (the
// edit would go with it); the status says why the Book is not Ready, with
// no Warning; once the ConfigMap is gone, the edit lands in a new one.
func TestSyncLeavesItsConfigMapWhileAFinalizerHoldsIt(t *testing.T) {
	book := withReadyStatus(newBook("demo", 1, "Old", 1), t0)
	held := ownConfigMap(book)
	held.Finalizers = []string{"example.com/hold"}
	held.DeletionTimestamp = &metav1.Time{Time: t0}
	edited := book.DeepCopy()
	edited.Generation, edited.Spec.Title = 2, "New"
	f := newFixture(t, Options{ConflictRecheck: time.Minute}, edited, held)

	res, err := f.syncResult("demo")
	if err != nil || res.RequeueAfter != time.Minute {
		t.Fatalf("sync: got %+v, %v; want RequeueAfter 1m (the recheck) and no error", res, err)
	}
	if n := len(filterActions(f.kubeClient.Actions(), "update", "configmaps", "-")); n != 0 {
		t.Errorf("ConfigMap updates while it is being deleted: got %d, want 0", n)
	}
	f.expectReady("demo", metav1.ConditionFalse, ReasonConfigMapDeleting)
	f.expectEvents()

	// The finalizer goes, and with it the ConfigMap.
	if err := f.kubeClient.CoreV1().ConfigMaps(testNamespace).Delete(t.Context(), "demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.feedBackConfigMap("demo")
	f.feedBackBook("demo")
	f.mustSync("demo")
	if got := f.mustGetConfigMap("demo").Data[TitleKey]; got != "New" {
		t.Errorf("ConfigMap title after the hold: got %q, want the edit", got)
	}
	f.expectReady("demo", metav1.ConditionTrue, ReasonConfigMapReady)
}
