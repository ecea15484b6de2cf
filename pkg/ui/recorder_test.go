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

package ui

import (
	"errors"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"ydzs.io/book-controller/pkg/controller"
)

// fakeClock advances a millisecond per reading, so every step has a time
// of its own.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { c.t = c.t.Add(time.Millisecond); return c.t }

func newTestRecorder(opts Options) *Recorder {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	opts.now = clock.now
	return NewRecorder(opts)
}

var demo = cache.ObjectName{Namespace: "default", Name: "demo"}

// travel plays a new Book's way through the controller as the controller
// reports it: created, synced by worker 1, whose two writes come back.
func travel(r *Recorder, key cache.ObjectName) {
	r.Event(controller.HandlerEvent{Informer: controller.BooksInformer, Type: controller.EventAdd, Key: key, ResourceVersion: "10", Decision: controller.DecisionEnqueued})
	r.WorkerBusy(1, key)
	r.Wrote(controller.APIWrite{Key: key, Resource: "configmaps", Verb: "create", ResourceVersion: "11"})
	r.Wrote(controller.APIWrite{Key: key, Resource: "books.webapp.ydzs.io", Verb: "update-status", ResourceVersion: "12"})
	r.Synced(controller.SyncOutcome{Worker: 1, Key: key, Result: "success"})
	r.Event(controller.HandlerEvent{Informer: controller.ConfigMapsInformer, Type: controller.EventAdd, Key: key, ResourceVersion: "11", Decision: controller.DecisionEcho})
	r.Event(controller.HandlerEvent{Informer: controller.BooksInformer, Type: controller.EventUpdate, Key: key, ResourceVersion: "12", Decision: controller.DecisionEcho})
}

func TestJourneyIsOrderedAndLinksEchoesToWrites(t *testing.T) {
	r := newTestRecorder(Options{Workers: 2})
	travel(r, demo)
	j, ok := r.Journey(demo)
	if !ok {
		t.Fatal("no journey for the Book")
	}
	var kinds []string
	for _, s := range j.Path {
		kinds = append(kinds, s.Kind)
	}
	want := []string{"event", "worker", "write", "write", "sync", "event", "event"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("steps: got %v, want %v", kinds, want)
	}
	for i := 1; i < len(j.Path); i++ {
		if !j.Path[i].At.After(j.Path[i-1].At) {
			t.Errorf("step %d at %v is not after step %d at %v", i, j.Path[i].At, i-1, j.Path[i-1].At)
		}
	}
	if w := j.Path[1]; w.Worker == nil || *w.Worker != 1 || w.WaitedSeconds <= 0 {
		t.Errorf("worker step: got worker %v waited %v, want worker 1 and a wait", w.Worker, w.WaitedSeconds)
	}
	if e := j.Path[5]; e.EchoOf == nil || *e.EchoOf != 2 {
		t.Errorf("ConfigMap echo: EchoOf %v, want 2 (the create)", e.EchoOf)
	}
	if e := j.Path[6]; e.EchoOf == nil || *e.EchoOf != 3 {
		t.Errorf("status echo: EchoOf %v, want 3 (the status update)", e.EchoOf)
	}
	if j.Path[2].Code != 201 || j.Path[3].Code != 200 {
		t.Errorf("answer codes: got %d, %d, want 201, 200", j.Path[2].Code, j.Path[3].Code)
	}
}

func TestErrorStepCarriesTheBackoffAndCode(t *testing.T) {
	r := newTestRecorder(Options{})
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "books"}, "demo", errors.New("stale"))
	r.Event(controller.HandlerEvent{Informer: controller.BooksInformer, Type: controller.EventAdd, Key: demo, ResourceVersion: "1", Decision: controller.DecisionEnqueued})
	r.WorkerBusy(0, demo)
	r.Wrote(controller.APIWrite{Key: demo, Resource: "books.webapp.ydzs.io", Verb: "update-status", Err: conflict})
	r.Backoff(demo, 40*time.Millisecond)
	r.Synced(controller.SyncOutcome{Key: demo, Result: "conflict", Err: conflict})
	j, _ := r.Journey(demo)
	last := j.Path[len(j.Path)-1]
	if last.Result != "conflict" || last.BackoffSeconds != 0.04 || last.Error == "" {
		t.Errorf("sync step: got %+v, want the conflict with a 40ms backoff", last)
	}
	if w := j.Path[2]; w.Code != 409 {
		t.Errorf("write answer: got %d, want 409", w.Code)
	}
	s := r.Snapshot(nil)
	if s.Queue.Backoffs != 1 || s.Syncs["conflict"] != 1 {
		t.Errorf("snapshot: backoffs %d, conflict syncs %d; want 1 and 1", s.Queue.Backoffs, s.Syncs["conflict"])
	}
	if n := s.Writes; len(n) != 1 || n[0].Code != 409 {
		t.Errorf("writes: got %+v, want one 409", n)
	}
}

func TestMemoryIsBounded(t *testing.T) {
	r := newTestRecorder(Options{MaxBooks: 3, StepsPerBook: 4})
	for i := range 5 {
		travel(r, cache.ObjectName{Namespace: "ns", Name: strconv.Itoa(i)})
	}
	if n := len(r.books); n != 3 {
		t.Errorf("Books kept: got %d, want 3", n)
	}
	if _, ok := r.Journey(cache.ObjectName{Namespace: "ns", Name: "0"}); ok {
		t.Error("the least recent Book is still kept")
	}
	j, ok := r.Journey(cache.ObjectName{Namespace: "ns", Name: "4"})
	if !ok || len(j.Path) != 4 || j.Steps != 7 || j.Dropped != 3 {
		t.Fatalf("journey: got %d steps kept of %d (%d dropped), want 4 of 7", len(j.Path), j.Steps, j.Dropped)
	}
	if j.Path[0].Kind != "write" || j.Path[3].Kind != "event" {
		t.Errorf("kept steps are not the latest four in order: %+v", j.Path)
	}
}

func TestSnapshotCountsWorkersAndInformers(t *testing.T) {
	r := newTestRecorder(Options{Workers: 4})
	r.Event(controller.HandlerEvent{Informer: controller.BooksInformer, Type: controller.EventAdd, InitialList: true, Key: demo, ResourceVersion: "1", Decision: controller.DecisionEnqueued})
	r.Relist(controller.ConfigMapsInformer, errors.New("watch ended"))
	r.WorkerBusy(3, demo)
	s := r.Snapshot(nil)
	if len(s.Workers.Busy) != 1 || s.Workers.Busy[0].Book != "default/demo" || s.Workers.Total != 4 {
		t.Errorf("workers: got %+v, want worker 3 busy with default/demo of 4", s.Workers)
	}
	b, cm := s.Informers["books"], s.Informers["configmaps"]
	if b.InitialList != 1 || b.Stored != 1 || b.Events["add"] != 1 {
		t.Errorf("Book informer: got %+v", b)
	}
	if cm.Relists != 1 || cm.LastRelistError != "watch ended" {
		t.Errorf("ConfigMap informer: got %+v", cm)
	}
	r.Synced(controller.SyncOutcome{Worker: 3, Key: demo, Result: "success"})
	if s := r.Snapshot(nil); len(s.Workers.Busy) != 0 {
		t.Errorf("a worker is still busy after its sync: %+v", s.Workers.Busy)
	}
}

// BenchmarkBytesPerBook fills a Recorder with 10,000 Books, each with a
// full ring of steps as a Book's creation and two edits leave them, and
// reports the heap it holds per Book (docs/ui.md).
//
//	go test ./pkg/ui -run '^$' -bench BytesPerBook -benchtime 1x
func BenchmarkBytesPerBook(b *testing.B) {
	const n = 10000
	for b.Loop() {
		keys := make([]cache.ObjectName, n)
		for i := range keys {
			// As the informers hand them over: strings of their own.
			keys[i] = cache.ObjectName{Namespace: "bench-" + strconv.Itoa(i%100), Name: "book-" + strconv.Itoa(i)}
		}
		before := heapInUse()
		r := NewRecorder(Options{})
		for _, key := range keys {
			for range (DefaultStepsPerBook + 6) / 7 {
				travel(r, key)
			}
		}
		after := heapInUse()
		runtime.KeepAlive(r)
		b.ReportMetric(float64(after-before)/n, "bytes/Book")
		b.ReportMetric(float64(DefaultStepsPerBook), "steps/Book")
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A Book of the initial list is shown queued as backfill, a live edit as
// live; a refused write's sync names the refusal, and both are counted.
func TestJourneyShowsBackfillAndRefusal(t *testing.T) {
	r := newTestRecorder(Options{Workers: 1})
	r.Event(controller.HandlerEvent{Informer: controller.BooksInformer, Type: controller.EventAdd, InitialList: true, Backfill: true,
		Key: demo, ResourceVersion: "10", Decision: controller.DecisionEnqueued})
	r.Event(controller.HandlerEvent{Informer: controller.BooksInformer, Type: controller.EventUpdate, Key: demo, ResourceVersion: "11",
		Decision: controller.DecisionEnqueued})
	r.WorkerBusy(0, demo)
	r.Backoff(demo, 5*time.Millisecond)
	r.Synced(controller.SyncOutcome{Key: demo, Result: "error", Err: errors.New("quota"), Refusal: controller.ReasonConfigMapQuotaExceeded})
	j, ok := r.Journey(demo)
	if !ok || len(j.Path) != 4 {
		t.Fatalf("journey: %+v, want 4 steps", j)
	}
	if j.Path[0].Queued != "backfill" || !j.Path[0].InitialList || j.Path[1].Queued != "live" {
		t.Errorf("queued: %q then %q, want backfill then live", j.Path[0].Queued, j.Path[1].Queued)
	}
	if s := j.Path[3]; s.Refusal != controller.ReasonConfigMapQuotaExceeded || s.BackoffSeconds != 0.005 {
		t.Errorf("sync step: %+v, want the refusal and a 5ms backoff", s)
	}
	snap := r.Snapshot(nil)
	if snap.Informers["books"].Backfill != 1 || snap.Refusals[controller.ReasonConfigMapQuotaExceeded] != 1 || snap.Syncs["error"] != 1 {
		t.Errorf("snapshot: backfill %d, refusals %v, syncs %v; want 1, one quota refusal, one error",
			snap.Informers["books"].Backfill, snap.Refusals, snap.Syncs)
	}
}
