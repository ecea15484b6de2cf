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
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
)

// recordingObserver keeps what the controller told it.
type recordingObserver struct {
	noopObserver
	mu       sync.Mutex
	events   []HandlerEvent
	syncs    []SyncOutcome
	backoffs []time.Duration
}

func (o *recordingObserver) Event(e HandlerEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

func (o *recordingObserver) Synced(s SyncOutcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.syncs = append(o.syncs, s)
}

func (o *recordingObserver) Backoff(_ cache.ObjectName, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.backoffs = append(o.backoffs, d)
}

// The observer hears which line of the live-first queue each key joins:
// an initial list's converged Book waits as backfill, one whose spec no
// sync has answered and an edit are live; with the
// arrival order (Off.LiveFirst) nothing is backfill.
func TestObserverTellsBackfillFromLive(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		obs := &recordingObserver{}
		f := newFixture(t, Options{Observer: obs, Off: Layers{LiveFirst: fifo}})
		old := withRV(withReadyStatus(newBook("listed", 1, "T", 1), time.Now()), "10")
		f.c.bookEventHandler().OnAdd(old, true)
		f.c.bookEventHandler().OnAdd(newBook("unanswered", 1, "T", 1), true)
		f.c.bookEventHandler().OnUpdate(old, withRV(old.DeepCopy(), "10")) // a resync
		f.c.bookEventHandler().OnUpdate(old, withRV(old.DeepCopy(), "11")) // an edit
		want := []struct {
			typ      EventType
			decision Decision
			initial  bool
			backfill bool
			key      string
		}{
			{EventAdd, DecisionEnqueued, true, !fifo, "listed"},
			{EventAdd, DecisionEnqueued, true, false, "unanswered"},
			{EventUpdate, DecisionResync, false, false, "listed"},
			{EventUpdate, DecisionEnqueued, false, false, "listed"},
		}
		if len(obs.events) != len(want) {
			t.Fatalf("Off.LiveFirst=%v: %d events observed, want %d: %+v", fifo, len(obs.events), len(want), obs.events)
		}
		for i, w := range want {
			e := obs.events[i]
			if e.Type != w.typ || e.Decision != w.decision || e.InitialList != w.initial || e.Backfill != w.backfill ||
				e.Key != bookKey(w.key) || e.Informer != BooksInformer {
				t.Errorf("Off.LiveFirst=%v, event %d: got %+v, want %+v", fifo, i, e, w)
			}
		}
	}
}

// A write the API server refused reaches the observer as an error sync
// naming the Ready reason, and its retry's backoff is observed.
func TestObserverHearsRefusalAndBackoff(t *testing.T) {
	obs := &recordingObserver{}
	f := newFixture(t, Options{Observer: obs})
	f.c.syncHandler = func(context.Context, cache.ObjectName) (Result, error) {
		return Result{}, &refusalError{reason: ReasonConfigMapQuotaExceeded, err: errQuotaFull}
	}
	f.c.queue.Add(bookKey("demo"))
	if !f.c.processNextWorkItem(t.Context(), 3) {
		t.Fatal("processNextWorkItem returned false on a live queue")
	}
	if len(obs.syncs) != 1 {
		t.Fatalf("%d syncs observed, want 1", len(obs.syncs))
	}
	s := obs.syncs[0]
	if s.Worker != 3 || s.Key != bookKey("demo") || s.Result != "error" || s.Refusal != ReasonConfigMapQuotaExceeded || s.Err == nil {
		t.Errorf("sync observed: %+v; want worker 3, default/demo, error, %s", s, ReasonConfigMapQuotaExceeded)
	}
	if len(obs.backoffs) != 1 || obs.backoffs[0] <= 0 {
		t.Errorf("backoffs observed: %v, want one, above zero", obs.backoffs)
	}
}
