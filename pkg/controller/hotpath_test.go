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
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	bookfake "ydzs.io/book-controller/pkg/generated/clientset/versioned/fake"
	bookinformers "ydzs.io/book-controller/pkg/generated/informers/externalversions"
)

// BenchmarkHotPath measures what every Book change costs the pipeline up to
// the sync: the handlers' decisions on a Book update, a resync and a
// ConfigMap update, then one trip through processNextWorkItem and
// reconcileHandler; ending in success, in a conflict that goes through the
// rate limiter, and in a write the API server refused (refusal.go), which
// also schedules the recheck. Run with and without an Observer: with none,
// allocs/op must equal the controller's before the Observer existed, and an
// Observer that does nothing must add none.
// docs/ui.md gives both figures. // fork:line ui
//
//	go test ./pkg/controller -run '^$' -bench HotPath -benchmem
func BenchmarkHotPath(b *testing.B) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "books"}, "demo", nil)
	refused := asRefusal(apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "demo",
		errors.New(`exceeded quota: books, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1`)))
	for _, outcome := range []struct {
		name string
		err  error
	}{{"success", nil}, {"conflict", conflict}, {"refused", refused}} {
		for _, obs := range []struct {
			name string
			o    Observer
		}{{"observer=nil", nil}, {"observer=noop", noopObserver{}}} {
			b.Run(outcome.name+"/"+obs.name, func(b *testing.B) {
				benchHotPath(b, obs.o, outcome.err)
			})
		}
	}
}

func benchHotPath(b *testing.B, obs Observer, syncErr error) {
	c := newBenchController(b, Options{Observer: obs})
	defer c.queue.ShutDown()
	c.syncHandler = func(context.Context, cache.ObjectName) (Result, error) { return Result{}, syncErr }
	books, configMaps := c.bookEventHandler(), c.configMapEventHandler()
	old := newBook("demo", 1, "t", 1)
	changed := old.DeepCopy()
	changed.ResourceVersion = "2"
	cmOld := projectConfigMap(ownConfigMap(old))
	cmNew := *cmOld
	cmNew.resourceVersion = "3"
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		books.OnUpdate(old, changed)
		books.OnUpdate(changed, changed)
		configMaps.OnUpdate(cmOld, &cmNew)
		if syncErr != nil {
			// The conflict's retry is in the rate limiter's hands; only
			// a key in the queue can be taken.
			c.queue.Forget(bookKey("demo"))
		}
		if !c.processNextWorkItem(ctx, 0) {
			b.Fatal("queue shut down")
		}
	}
}

// newBenchController is a controller on fake clients, with opts, whose rate
// limiter never delays, so that a retried key is back in the queue at once.
func newBenchController(b *testing.B, opts Options) *Controller {
	opts.RateLimiter = zeroRateLimiter{}
	kube, books := kubefake.NewClientset(), bookfake.NewSimpleClientset()
	kubeFactory := kubeinformers.NewSharedInformerFactory(kube, 0)
	bookFactory := bookinformers.NewSharedInformerFactory(books, 0)
	c, err := New(kube, books, bookFactory.Webapp().V2().Books(), kubeFactory.Core().V1().ConfigMaps(),
		events.NewFakeRecorder(10), opts)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// zeroRateLimiter hands every key back at once.
type zeroRateLimiter struct{}

func (zeroRateLimiter) When(cache.ObjectName) time.Duration { return 0 }
func (zeroRateLimiter) Forget(cache.ObjectName)             {}
func (zeroRateLimiter) NumRequeues(cache.ObjectName) int    { return 0 }

// noopObserver is an Observer that does nothing: what the seam itself costs.
type noopObserver struct{}

func (noopObserver) Event(HandlerEvent)                                 {}
func (noopObserver) Relist(Informer, error)                             {}
func (noopObserver) WorkerBusy(int, cache.ObjectName)                   {}
func (noopObserver) CacheWait(cache.ObjectName, string, string, string) {}
func (noopObserver) Wrote(APIWrite)                                     {}
func (noopObserver) Backoff(cache.ObjectName, time.Duration)            {}
func (noopObserver) Synced(SyncOutcome)                                 {}

// BenchmarkConvergedSync measures one trip of a converged Book's key
// through the worker loop and the sync, which finds nothing to write: the
// work of a restart's backfill, once per listed Book. It fails if the sync
// writes anything.
//
//	go test ./pkg/controller -run '^$' -bench ConvergedSync -benchmem
func BenchmarkConvergedSync(b *testing.B) {
	f := newFixture(b, Options{}, newBook("demo", 1, "t", 1))
	f.mustSync("demo")
	f.feedBackBook("demo")
	f.feedBackConfigMap("demo")
	f.mustSync("demo")
	f.clearActions()
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		f.c.queue.Add(bookKey("demo"))
		if !f.c.processNextWorkItem(ctx, 0) {
			b.Fatal("queue shut down")
		}
	}
	f.expectNoWrites()
}
