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
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	bookfake "ydzs.io/book-controller/pkg/generated/clientset/versioned/fake"
	bookinformers "ydzs.io/book-controller/pkg/generated/informers/externalversions"
	"ydzs.io/book-controller/pkg/shard" // fork:line shards
)

const testNamespace = "default"

// t0 is the fake clock's starting time. It has no sub-second part, so a
// condition stamped from it equals its round-tripped self.
var t0 = time.Date(2025, time.March, 4, 10, 0, 0, 0, time.UTC)

// fastRateLimiter retries failed keys after a millisecond, so tests that
// wait for a requeue finish quickly.
func fastRateLimiter() workqueue.TypedRateLimiter[cache.ObjectName] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Millisecond, 10*time.Millisecond)
}

// fixture is the test harness, after sample-controller's: it holds the fake
// clients, the informer factories whose indexers are filled by hand (the
// informers are never started), the fake recorder and clock, and the
// controller wired to all of them.
type fixture struct {
	t testing.TB

	kubeClient *kubefake.Clientset
	bookClient *bookfake.Clientset

	kubeFactory kubeinformers.SharedInformerFactory
	bookFactory bookinformers.SharedInformerFactory

	recorder *events.FakeRecorder
	clock    *clocktesting.FakeClock
	versions *serverVersions
	c        *Controller
}

// firstWrittenVersion is the resourceVersion of the first write a test
// makes. Objects a test starts with carry smaller ones (newBook and
// ownConfigMap: "1"), as objects that were there before.
const firstWrittenVersion = 101

// serverVersions makes the fake clients number writes the way the API
// server does, so that the own-write tracker (ownwrites.go) is at work in
// every test as in a cluster: each create, update and delete, of any
// resource and through either client, gets the next resourceVersion of one
// counter (etcd's revision), and an update that carries another
// resourceVersion than the stored object's is refused with 409 Conflict.
// The fake trackers keep objects as given, resourceVersion and all.
type serverVersions struct {
	last atomic.Int64
}

// current is the resourceVersion of the latest write.
func (v *serverVersions) current() string {
	return strconv.FormatInt(max(v.last.Load(), firstWrittenVersion-1), 10)
}

func (v *serverVersions) next() string {
	v.last.CompareAndSwap(0, firstWrittenVersion-1)
	return strconv.FormatInt(v.last.Add(1), 10)
}

// install puts the reactors at the front of client's chain. Reactors a test
// prepends later (injected errors) still come first.
func (v *serverVersions) install(client *core.Fake, tracker core.ObjectTracker) {
	store := core.ObjectReaction(tracker)
	client.PrependReactor("delete", "*", func(core.Action) (bool, runtime.Object, error) {
		v.next() // the deletion is a write too; the tracker does the rest
		return false, nil, nil
	})
	client.PrependReactor("update", "*", func(a core.Action) (bool, runtime.Object, error) {
		update, ok := a.(core.UpdateActionImpl)
		if !ok {
			return false, nil, nil
		}
		obj := update.Object.DeepCopyObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		stored, err := tracker.Get(a.GetResource(), a.GetNamespace(), m.GetName())
		if err != nil {
			return true, nil, err
		}
		if sent, have := m.GetResourceVersion(), mustAccessor(stored).GetResourceVersion(); sent != "" && sent != have {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), m.GetName(),
				fmt.Errorf("the object has been modified: resourceVersion %s, stored %s", sent, have))
		}
		m.SetResourceVersion(v.next())
		update.Object = obj
		return store(update)
	})
	client.PrependReactor("create", "*", func(a core.Action) (bool, runtime.Object, error) {
		create, ok := a.(core.CreateActionImpl)
		if !ok || create.GetSubresource() != "" {
			return false, nil, nil
		}
		obj := create.Object.DeepCopyObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		m.SetResourceVersion(v.next())
		create.Object = obj
		return store(create)
	})
}

func mustAccessor(obj runtime.Object) metav1.Object {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(err)
	}
	return m
}

// newFixture builds a controller whose clients hold objects and whose listers
// hold what its informers would: every Book, and the ConfigMaps that carry
// the managed-by label the ConfigMap informer selects on.
func newFixture(t testing.TB, opts Options, objects ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{
		t:        t,
		recorder: events.NewFakeRecorder(100),
		clock:    clocktesting.NewFakeClock(t0),
	}
	var kubeObjs, bookObjs []runtime.Object
	for _, obj := range objects {
		switch obj.(type) {
		case *webappv2.Book:
			bookObjs = append(bookObjs, obj)
		default:
			kubeObjs = append(kubeObjs, obj)
		}
	}
	f.kubeClient = kubefake.NewClientset(kubeObjs...)
	// NewClientset's field-managed tracker has no schema for custom
	// resources and rejects creating a Book
	// (https://github.com/kubernetes/kubernetes/issues/126850); the simple
	// tracker is all the Book client needs, as the controller never applies.
	f.bookClient = bookfake.NewSimpleClientset(bookObjs...)
	f.versions = &serverVersions{}
	f.versions.install(&f.kubeClient.Fake, f.kubeClient.Tracker())
	f.versions.install(&f.bookClient.Fake, f.bookClient.Tracker())
	// The factories as pkg/manager builds them, less what the fakes ignore:
	// the ConfigMap informer is label-filtered like the real one.
	f.kubeFactory = kubeinformers.NewSharedInformerFactoryWithOptions(f.kubeClient, 0,
		kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = ManagedBySelector }))
	f.bookFactory = bookinformers.NewSharedInformerFactory(f.bookClient, 0)

	if opts.Clock == nil {
		opts.Clock = f.clock
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = fastRateLimiter()
	}
	if opts.ConflictRecheck == 0 {
		// Long enough never to fire during a test that does not ask for it.
		opts.ConflictRecheck = time.Hour
	}
	c, err := New(f.kubeClient, f.bookClient,
		f.bookFactory.Webapp().V2().Books(), f.kubeFactory.Core().V1().ConfigMaps(),
		f.recorder, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.c = c
	t.Cleanup(c.queue.ShutDown)

	for _, obj := range objects {
		switch o := obj.(type) {
		case *webappv2.Book:
			f.addBookToLister(o)
		case *corev1.ConfigMap:
			if inConfigMapCache(o) {
				f.addConfigMapToLister(o)
			}
		}
	}
	// As after the informers' initial lists: the caches are at the
	// resourceVersion of the world before the test's first write.
	f.bookIndexer().Bookmark(f.versions.current())
	f.configMapIndexer().Bookmark(f.versions.current())
	return f
}

// tracker is the controller's own-writes layer, which the fixture's
// Options leave on unless a test turns it off.
func (f *fixture) tracker() *ownWrites {
	f.t.Helper()
	w, ok := f.c.ownWrites.(*ownWrites)
	if !ok {
		f.t.Fatalf("the own-writes layer is off (%T)", f.c.ownWrites)
	}
	return w
}

func inConfigMapCache(cm *corev1.ConfigMap) bool {
	return labels.SelectorFromSet(labels.Set{ManagedByLabel: ManagedByValue}).Matches(labels.Set(cm.Labels))
}

func (f *fixture) bookIndexer() cache.Indexer {
	return f.bookFactory.Webapp().V2().Books().Informer().GetIndexer()
}

func (f *fixture) configMapIndexer() cache.Indexer {
	return f.kubeFactory.Core().V1().ConfigMaps().Informer().GetIndexer()
}

func (f *fixture) addBookToLister(b *webappv2.Book) {
	f.t.Helper()
	if err := f.bookIndexer().Update(b.DeepCopy()); err != nil {
		f.t.Fatalf("adding Book to indexer: %v", err)
	}
}

// addConfigMapToLister puts what the informer would keep of cm (its
// projection, configmapprojection.go, or cm itself with the projection
// off) into the ConfigMap cache.
func (f *fixture) addConfigMapToLister(cm *corev1.ConfigMap) {
	f.t.Helper()
	if err := f.configMapIndexer().Update(f.c.cachedForm(cm.DeepCopy())); err != nil {
		f.t.Fatalf("adding ConfigMap to indexer: %v", err)
	}
}

// feedBackBook copies the Book as the fake API server holds it into the
// lister, as the informer would after the watch event.
func (f *fixture) feedBackBook(name string) *webappv2.Book {
	f.t.Helper()
	b := f.getBook(name)
	f.addBookToLister(b)
	return b
}

// feedBackConfigMap does the same for a ConfigMap, honouring the label
// selector: a ConfigMap that lost the label leaves the cache.
func (f *fixture) feedBackConfigMap(name string) {
	f.t.Helper()
	cm := f.getConfigMap(name)
	if cm == nil || !inConfigMapCache(cm) {
		// The delete event (or the update that took the label away) is at
		// least as new as the latest write.
		_ = f.configMapIndexer().Delete(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: testNamespace, Name: name, ResourceVersion: f.versions.current()}})
		return
	}
	f.addConfigMapToLister(cm)
}

func (f *fixture) sync(name string) error {
	f.t.Helper()
	_, err := f.syncResult(name)
	return err
}

// syncResult runs the syncHandler on the Book name and returns its outcome.
func (f *fixture) syncResult(name string) (Result, error) {
	f.t.Helper()
	return f.c.syncHandler(f.t.Context(), cache.ObjectName{Namespace: testNamespace, Name: name})
}

func (f *fixture) mustSync(name string) {
	f.t.Helper()
	if err := f.sync(name); err != nil {
		f.t.Fatalf("syncHandler(%s): %v", name, err)
	}
}

func (f *fixture) getBook(name string) *webappv2.Book {
	f.t.Helper()
	b, err := f.bookClient.WebappV2().Books(testNamespace).Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("getting Book %s: %v", name, err)
	}
	return b
}

// getConfigMap returns the ConfigMap from the fake API server, or nil.
func (f *fixture) getConfigMap(name string) *corev1.ConfigMap {
	f.t.Helper()
	cm, err := f.kubeClient.CoreV1().ConfigMaps(testNamespace).Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return cm
}

func (f *fixture) mustGetConfigMap(name string) *corev1.ConfigMap {
	f.t.Helper()
	cm := f.getConfigMap(name)
	if cm == nil {
		f.t.Fatalf("ConfigMap %s does not exist", name)
	}
	return cm
}

// clearActions forgets the actions recorded so far, and the getConfigMap and
// getBook calls the test made itself.
func (f *fixture) clearActions() {
	f.kubeClient.ClearActions()
	f.bookClient.ClearActions()
}

func isWrite(a core.Action) bool {
	switch a.GetVerb() {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// writes returns the write actions both fake clients recorded, whether or
// not they succeeded.
func (f *fixture) writes() []core.Action {
	var out []core.Action
	for _, a := range append(f.kubeClient.Actions(), f.bookClient.Actions()...) {
		if isWrite(a) {
			out = append(out, a)
		}
	}
	return out
}

func (f *fixture) expectNoWrites() {
	f.t.Helper()
	if w := f.writes(); len(w) != 0 {
		f.t.Errorf("expected no write actions, got %d: %s", len(w), describeActions(w))
	}
}

// filterActions returns the recorded actions with the given verb on the
// given resource ("" matches any subresource, "-" only the main resource).
func filterActions(actions []core.Action, verb, resource, subresource string) []core.Action {
	var out []core.Action
	for _, a := range actions {
		if a.GetVerb() != verb || a.GetResource().Resource != resource {
			continue
		}
		switch subresource {
		case "":
		case "-":
			if a.GetSubresource() != "" {
				continue
			}
		default:
			if a.GetSubresource() != subresource {
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

func (f *fixture) statusWrites() []core.Action {
	return filterActions(f.bookClient.Actions(), "update", "books", "status")
}

func describeActions(actions []core.Action) string {
	s := ""
	for _, a := range actions {
		s += fmt.Sprintf("[%s %s/%s %s] ", a.GetVerb(), a.GetResource().Resource, a.GetSubresource(), a.GetNamespace())
	}
	return s
}

// events drains and returns the events recorded so far.
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

// expectEvents checks that exactly the wanted events were recorded since the
// last call, in order; each want is a prefix of "type reason note".
func (f *fixture) expectEvents(want ...string) {
	f.t.Helper()
	got := f.events()
	if len(got) != len(want) {
		f.t.Errorf("events: got %q, want %q", got, want)
		return
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			f.t.Errorf("event %d: got %q, want it to start with %q", i, got[i], want[i])
		}
	}
}

// Object builders.

func newBook(name string, generation int64, title string, price int32) *webappv2.Book {
	return &webappv2.Book{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       testNamespace,
			UID:             types.UID("uid-" + name),
			Generation:      generation,
			ResourceVersion: "1",
		},
		Spec: webappv2.BookSpec{Title: title, Price: webappv2.WholePrice(price)},
	}
}

// withReadyStatus returns a copy of b whose status says it converged on its
// current generation at time at.
func withReadyStatus(b *webappv2.Book, at time.Time) *webappv2.Book {
	b = b.DeepCopy()
	b.Status = webappv2.BookStatus{
		ObservedGeneration: b.Generation,
		ConfigMapName:      b.Name,
		Conditions: []metav1.Condition{{
			Type:               ConditionReady,
			Status:             metav1.ConditionTrue,
			Reason:             ReasonConfigMapReady,
			Message:            fmt.Sprintf("ConfigMap %s holds the current spec", b.Name),
			ObservedGeneration: b.Generation,
			LastTransitionTime: metav1.NewTime(at),
		}},
	}
	return b
}

// ownConfigMap is the ConfigMap as the controller would write it for b,
// built by hand rather than with desiredConfigMap.
func ownConfigMap(b *webappv2.Book) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            b.Name,
			Namespace:       b.Namespace,
			ResourceVersion: "1",
			Labels: map[string]string{
				ManagedByLabel:    ManagedByValue,
				BookLabel:         b.Name,
				shard.BucketLabel: shard.BucketName(shard.BucketOf(b.UID)), // fork:line shards
			},
			OwnerReferences: []metav1.OwnerReference{bookControllerRef(b.Name, b.UID)},
		},
		// configMapData's own test (configmap_test.go) states its output.
		Data: configMapData(&b.Spec),
	}
}

func bookControllerRef(name string, uid types.UID) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion:         "webapp.ydzs.io/v2",
		Kind:               "Book",
		Name:               name,
		UID:                uid,
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}

// Assertions on the state of the world.

func (f *fixture) expectConfigMapMatches(b *webappv2.Book) *corev1.ConfigMap {
	f.t.Helper()
	cm := f.mustGetConfigMap(b.Name)
	wantData := configMapData(&b.Spec)
	if len(cm.Data) != len(wantData) {
		f.t.Errorf("ConfigMap data: got %v, want %v", cm.Data, wantData)
	}
	for k, v := range wantData {
		if cm.Data[k] != v {
			f.t.Errorf("ConfigMap data[%s]: got %q, want %q", k, cm.Data[k], v)
		}
	}
	if len(cm.BinaryData) != 0 {
		f.t.Errorf("ConfigMap binaryData: got %v, want none", cm.BinaryData)
	}
	if cm.Labels[ManagedByLabel] != ManagedByValue || cm.Labels[BookLabel] != b.Name {
		f.t.Errorf("ConfigMap labels: got %v, want %s=%s and %s=%s", cm.Labels, ManagedByLabel, ManagedByValue, BookLabel, b.Name)
	}
	// fork:begin shards
	if bucket := shard.BucketName(shard.BucketOf(b.UID)); cm.Labels[shard.BucketLabel] != bucket {
		f.t.Errorf("ConfigMap labels: got %v, want %s=%s", cm.Labels, shard.BucketLabel, bucket)
	}
	// fork:end shards
	ref := metav1.GetControllerOfNoCopy(cm)
	if ref == nil {
		f.t.Fatalf("ConfigMap has no controller reference: %v", cm.OwnerReferences)
	}
	want := bookControllerRef(b.Name, b.UID)
	if ref.APIVersion != want.APIVersion || ref.Kind != want.Kind || ref.Name != want.Name || ref.UID != want.UID {
		f.t.Errorf("controller reference: got %+v, want %+v", *ref, want)
	}
	if ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		f.t.Errorf("controller reference: blockOwnerDeletion is not true")
	}
	return cm
}

// expectReady checks the Book in the fake API server: Ready has the given
// status and reason, and the status describes the Book's current generation.
func (f *fixture) expectReady(name string, status metav1.ConditionStatus, reason string) metav1.Condition {
	f.t.Helper()
	b := f.getBook(name)
	if b.Status.ObservedGeneration != b.Generation {
		f.t.Errorf("status.observedGeneration: got %d, want %d", b.Status.ObservedGeneration, b.Generation)
	}
	if b.Status.ConfigMapName != name {
		f.t.Errorf("status.configMapName: got %q, want %q", b.Status.ConfigMapName, name)
	}
	if len(b.Status.Conditions) != 1 {
		f.t.Errorf("status.conditions: got %d, want 1: %+v", len(b.Status.Conditions), b.Status.Conditions)
	}
	c := meta.FindStatusCondition(b.Status.Conditions, ConditionReady)
	if c == nil {
		f.t.Fatalf("no Ready condition in %+v", b.Status.Conditions)
	}
	if c.Status != status || c.Reason != reason {
		f.t.Errorf("Ready: got %s/%s, want %s/%s", c.Status, c.Reason, status, reason)
	}
	if c.ObservedGeneration != b.Generation {
		f.t.Errorf("Ready.observedGeneration: got %d, want %d", c.ObservedGeneration, b.Generation)
	}
	if c.Message == "" {
		f.t.Errorf("Ready has no message")
	}
	return *c
}

func bookKey(name string) cache.ObjectName {
	return cache.ObjectName{Namespace: testNamespace, Name: name}
}

// cachedForm is what the ConfigMap informer would keep of obj: its
// projection, or obj itself with the projection off.
func (c *Controller) cachedForm(obj any) any {
	transform := c.configMaps.transformFunc()
	if transform == nil {
		return obj
	}
	out, err := transform(obj)
	if err != nil {
		panic(err)
	}
	return out
}

// projectingConfigMapHandler is the ConfigMap event handler as the informer
// calls it: ConfigMaps, bare or in tombstones, arrive projected by
// projectConfigMap; anything else arrives as it is.
func (c *Controller) projectingConfigMapHandler() cache.ResourceEventHandler {
	h := c.configMapEventHandler()
	project := func(obj any) any {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			tombstone.Obj = c.cachedForm(tombstone.Obj)
			return tombstone
		}
		return c.cachedForm(obj)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.OnAdd(project(obj), false) },
		UpdateFunc: func(oldObj, newObj any) { h.OnUpdate(project(oldObj), project(newObj)) },
		DeleteFunc: func(obj any) { h.OnDelete(project(obj)) },
	}
}
