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

package migration

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
)

const crdName = "books.webapp.ydzs.io"

var gr = metav1.GroupResource{Group: "webapp.ydzs.io", Resource: "books"}

func crd(generation int64, storage string, stored ...string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: crdName, UID: "crd-uid", Generation: generation},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
			{Name: "v1", Served: true, Storage: storage == "v1"},
			{Name: "v2", Served: true, Storage: storage == "v2"},
		}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: stored},
	}
}

// svm is a migration as start creates it, with conditions of the given
// types set True at their given times.
func svm(name string, uid types.UID, stored string, created time.Time, conds map[svmv1.MigrationConditionType]time.Time) *svmv1.StorageVersionMigration {
	s := &svmv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), CreationTimestamp: metav1.NewTime(created),
			Labels:      map[string]string{ManagedByLabel: "book-controller"},
			Annotations: map[string]string{CRDUIDAnnotation: string(uid), StoredVersionsAnnotation: stored}},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: gr},
	}
	for t, at := range conds {
		s.Status.Conditions = append(s.Status.Conditions, metav1.Condition{Type: string(t), Status: metav1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(at), Reason: "Test", Message: "the reason " + string(t)})
	}
	return s
}

type fixture struct {
	t        *testing.T
	ext      *apiextensionsfake.Clientset
	kube     *kubefake.Clientset
	recorder *events.FakeRecorder
	clock    *clocktesting.FakeClock
	m        *Migrator
}

func newFixture(t *testing.T, c *apiextensionsv1.CustomResourceDefinition, svms ...runtime.Object) *fixture {
	f := &fixture{t: t, ext: apiextensionsfake.NewClientset(c), kube: kubefake.NewClientset(svms...),
		recorder: events.NewFakeRecorder(10), clock: clocktesting.NewFakeClock(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))}
	m, err := New(Config{CRDName: crdName, Extensions: f.ext, Kube: f.kube, Recorder: f.recorder, Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return f
}

// sync runs one sync on what the fake clients hold (as the informers'
// caches would).
func (f *fixture) sync() time.Duration {
	f.t.Helper()
	f.ext.ClearActions()
	f.kube.ClearActions()
	ctx := context.Background()
	wait, err := f.m.sync(ctx,
		func(name string) (*apiextensionsv1.CustomResourceDefinition, error) {
			return f.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		},
		func(name string) (*svmv1.StorageVersionMigration, error) {
			return f.kube.StoragemigrationV1().StorageVersionMigrations().Get(ctx, name, metav1.GetOptions{})
		})
	if err != nil {
		f.t.Fatal(err)
	}
	return wait
}

func (f *fixture) stored() []string {
	c, err := f.ext.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), crdName, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return c.Status.StoredVersions
}

func (f *fixture) migrations() []string {
	list, err := f.kube.StoragemigrationV1().StorageVersionMigrations().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return names
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// writes are the verbs of the actions that were not reads.
func writes(actions ...[]interface{ GetVerb() string }) []string {
	var out []string
	for _, list := range actions {
		for _, a := range list {
			if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
				out = append(out, v)
			}
		}
	}
	return out
}

func (f *fixture) writes() []string {
	var all []interface{ GetVerb() string }
	for _, a := range f.ext.Actions() {
		all = append(all, a)
	}
	for _, a := range f.kube.Actions() {
		all = append(all, a)
	}
	return writes(all)
}

func TestNothingToDo(t *testing.T) {
	f := newFixture(t, crd(1, "v2", "v2"))
	f.sync()
	if w := f.writes(); len(w) != 0 {
		t.Errorf("writes %v, want none", w)
	}
	if e := f.events(); len(e) != 0 {
		t.Errorf("events %q, want none", e)
	}
}

func TestStartsOneMigration(t *testing.T) {
	f := newFixture(t, crd(2, "v2", "v1", "v2"))
	f.sync()
	want := Name(crdName, "v2", 2)
	if got := f.migrations(); !slices.Equal(got, []string{want}) {
		t.Fatalf("migrations %v, want [%s]", got, want)
	}
	s, _ := f.kube.StoragemigrationV1().StorageVersionMigrations().Get(context.Background(), want, metav1.GetOptions{})
	if s.Spec.Resource != gr || s.Annotations[CRDUIDAnnotation] != "crd-uid" || s.Annotations[StoredVersionsAnnotation] != "v1,v2" ||
		s.Labels[ManagedByLabel] != "book-controller" {
		t.Errorf("migration %+v", s)
	}
	if e := f.events(); len(e) != 1 || !strings.Contains(e[0], EventMigrationStarted) {
		t.Errorf("events %q, want one %s", e, EventMigrationStarted)
	}
	// Running: nothing more.
	f.sync()
	if w := f.writes(); len(w) != 0 {
		t.Errorf("second sync writes %v, want none", w)
	}
	if !slices.Equal(f.stored(), []string{"v1", "v2"}) {
		t.Errorf("storedVersions %v changed while running", f.stored())
	}
}

// TestHoldKeepsTheMigrationFromStarting: while Hold says no (the webhook
// the rewrites need is starting), nothing is created and the migrator asks
// again soon; once it says yes, the migration starts.
func TestHoldKeepsTheMigrationFromStarting(t *testing.T) {
	f := newFixture(t, crd(2, "v2", "v1", "v2"))
	held := true
	f.m.cfg.Hold = func(*apiextensionsv1.CustomResourceDefinition) error {
		if held {
			return errors.New("the conversion webhook is starting")
		}
		return nil
	}
	if wait := f.sync(); wait != holdRecheck {
		t.Errorf("held: next sync in %v, want %v", wait, holdRecheck)
	}
	if got := f.migrations(); len(got) != 0 {
		t.Errorf("held: migrations %v, want none", got)
	}
	held = false
	f.sync()
	if got, want := f.migrations(), []string{Name(crdName, "v2", 2)}; !slices.Equal(got, want) {
		t.Errorf("released: migrations %v, want %v", got, want)
	}
}

func TestWaitsForAnotherMigrationOfTheResource(t *testing.T) {
	other := svm("someone-elses", "x", "", time.Now(), nil)
	f := newFixture(t, crd(2, "v2", "v1", "v2"), other)
	f.sync()
	if got := f.migrations(); !slices.Equal(got, []string{"someone-elses"}) {
		t.Errorf("migrations %v, want only the running one", got)
	}
}

func TestSucceededSetsStoredVersions(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	s := svm(Name(crdName, "v2", 2), "crd-uid", "v1,v2", now.Add(-time.Minute),
		map[svmv1.MigrationConditionType]time.Time{svmv1.MigrationSucceeded: now})
	f := newFixture(t, crd(2, "v2", "v1", "v2"), s)
	f.sync()
	if got := f.stored(); !slices.Equal(got, []string{"v2"}) {
		t.Errorf("storedVersions %v, want [v2]", got)
	}
	e := f.events()
	if len(e) != 2 || !strings.Contains(e[0], EventMigrationSucceeded) || !strings.Contains(e[1], EventStoredVersions) {
		t.Errorf("events %q, want %s then %s", e, EventMigrationSucceeded, EventStoredVersions)
	}
	f.sync()
	if w := f.writes(); len(w) != 0 {
		t.Errorf("writes %v after the migration, want none", w)
	}
	if e := f.events(); len(e) != 0 {
		t.Errorf("events %q reported twice", e)
	}
}

// A migration of an earlier generation, or of a CRD of the same name
// deleted since, proves nothing about the objects now.
func TestOldMigrationNotTrusted(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	done := map[svmv1.MigrationConditionType]time.Time{svmv1.MigrationSucceeded: now}
	t.Run("earlier generation", func(t *testing.T) {
		f := newFixture(t, crd(3, "v2", "v1", "v2"), svm(Name(crdName, "v2", 2), "crd-uid", "v1,v2", now, done))
		f.sync()
		if !slices.Equal(f.stored(), []string{"v1", "v2"}) {
			t.Errorf("storedVersions %v, want [v1 v2]", f.stored())
		}
		if got := f.migrations(); !slices.Contains(got, Name(crdName, "v2", 3)) {
			t.Errorf("migrations %v, want one for generation 3", got)
		}
	})
	t.Run("another CRD's", func(t *testing.T) {
		f := newFixture(t, crd(2, "v2", "v1", "v2"), svm(Name(crdName, "v2", 2), "deleted-crd-uid", "v1,v2", now, done))
		f.sync()
		if !slices.Equal(f.stored(), []string{"v1", "v2"}) {
			t.Errorf("storedVersions %v, want [v1 v2]", f.stored())
		}
	})
}

// kube-controller-manager 1.37 drops the old versions after a failed
// migration too: they are put back, and a new migration waits for the
// backoff.
func TestFailedRestoresAndBacksOff(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	name := Name(crdName, "v2", 2)
	s := svm(name, "crd-uid", "v1,v2", now.Add(-time.Minute), map[svmv1.MigrationConditionType]time.Time{svmv1.MigrationFailed: now})
	f := newFixture(t, crd(2, "v2", "v2"), s)
	wait := f.sync()
	if got := f.stored(); !slices.Equal(got, []string{"v1", "v2"}) {
		t.Errorf("storedVersions %v, want [v1 v2] put back", got)
	}
	e := f.events()
	if len(e) != 2 || !strings.Contains(e[0], EventStoredRestored) || !strings.Contains(e[1], EventMigrationFailed) ||
		!strings.Contains(e[1], "the reason Failed") {
		t.Errorf("events %q, want %s then %s with the reason", e, EventStoredRestored, EventMigrationFailed)
	}
	if wait != DefaultFirstRetry {
		t.Errorf("wait %v, want %v", wait, DefaultFirstRetry)
	}
	f.sync()
	if w := f.writes(); len(w) != 0 {
		t.Errorf("writes %v within the backoff, want none", w)
	}
	f.clock.Step(DefaultFirstRetry)
	f.sync()
	if got := f.migrations(); len(got) != 0 {
		t.Errorf("migrations %v after the backoff, want the failed one deleted", got)
	}
	f.sync()
	if got := f.migrations(); !slices.Equal(got, []string{name}) {
		t.Errorf("migrations %v, want a new %s", got, name)
	}
}
