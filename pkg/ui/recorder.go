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

// Package ui is a live view of the controller's machinery: a Recorder, the
// controller's Observer, keeps counters and each Book's recent journey
// (watch event → handler → queue → worker → sync → writes → their echoes),
// and a Server shows them in a page drawn as the controller-runtime lesson
// draws the pipeline, fed by Server-Sent Events, with the same figures as
// JSON under /api/. See docs/ui.md.
package ui

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	"ydzs.io/book-controller/pkg/controller"
)

// Defaults for Options left zero.
const (
	DefaultMaxBooks     = 10000
	DefaultStepsPerBook = 32
)

// Options bound what a Recorder keeps.
type Options struct {
	// MaxBooks is how many Books' journeys are kept; the Book whose last
	// step is oldest is dropped first.
	MaxBooks int
	// StepsPerBook is how many of a Book's latest steps are kept.
	StepsPerBook int
	// Workers is how many workers each controller runs, for the idle count.
	Workers int
	// SourceURL is where the page's links to this repository's files
	// point: a path such as pkg/controller/handlers.go is appended to it.
	// Empty: the page's own default, the module path's home.
	SourceURL string
	// now is the clock; tests set it.
	now func() time.Time
}

// Indexes of the counters' dimensions.
const (
	numInformers  = 3 // books, configmaps, none (a released event)
	numEventTypes = 4 // add, update, delete, released
	numDecisions  = 4 // enqueued, echo, resync, invalid
)

// Recorder is a controller.Observer that keeps what the page shows. Its
// methods are called by the informers' handler goroutines and the workers;
// the Server reads it.
type Recorder struct {
	opts Options

	// Per-event counters: written by the handler goroutines, read by
	// snapshots; atomic.
	events  [numInformers][numEventTypes][numDecisions]atomic.Int64
	initial [numInformers]atomic.Int64
	// backfill counts the keys queued behind the live ones (livefirst.go).
	backfill [numInformers]atomic.Int64
	stored   [numInformers]atomic.Int64
	relists  [numInformers]atomic.Int64

	// mu guards everything below. Writers: handler goroutines and workers
	// (the Observer methods); readers: snapshots and journeys (the Server).
	mu sync.Mutex
	// books are the journeys, at most opts.MaxBooks; lru orders them, the
	// most recently touched first.
	books map[cache.ObjectName]*journey
	lru   journeyList
	// pending is when each queued key became ready to be taken: the queue
	// wait a worker's step reports, and the longest wait.
	pending map[cache.ObjectName]int64
	// busy is, per key being synced, the worker and since when.
	busy        map[cache.ObjectName]busyWorker
	taken       int64
	syncs       map[string]int64
	refusals    map[string]int64
	writes      map[writeKey]int64
	cacheWaits  map[string]int64
	backoffs    int64
	lastBackoff time.Duration
	// lastRelist is, per informer, the error that ended its last watch
	// and when: the gaps between attempts show the Reflector's backoff.
	lastRelist   [numInformers]string
	lastRelistAt [numInformers]int64
	// fork:begin v2

	// conversions are the conversion webhook's reviews (conversions.go),
	// kept without mu: the webhook must not wait for the page.
	conversions conversionLog
	// fork:end v2
}

type busyWorker struct {
	worker int
	since  int64
}

type writeKey struct {
	verb, resource string
	code           int
}

// NewRecorder returns an empty Recorder.
func NewRecorder(opts Options) *Recorder {
	if opts.MaxBooks <= 0 {
		opts.MaxBooks = DefaultMaxBooks
	}
	if opts.StepsPerBook <= 0 {
		opts.StepsPerBook = DefaultStepsPerBook
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	return &Recorder{
		opts:       opts,
		books:      map[cache.ObjectName]*journey{},
		pending:    map[cache.ObjectName]int64{},
		busy:       map[cache.ObjectName]busyWorker{},
		syncs:      map[string]int64{},
		refusals:   map[string]int64{},
		writes:     map[writeKey]int64{},
		cacheWaits: map[string]int64{},
	}
}

var _ controller.Observer = (*Recorder)(nil)

// Event records a handler's decision.
func (r *Recorder) Event(e controller.HandlerEvent) {
	inf, typ, dec := informerIndex(e.Informer), eventTypeIndex(e.Type), decisionIndex(e.Decision)
	r.events[inf][typ][dec].Add(1)
	if e.InitialList {
		r.initial[inf].Add(1)
	}
	if e.Backfill {
		r.backfill[inf].Add(1)
	}
	switch e.Type {
	case controller.EventAdd:
		r.stored[inf].Add(1)
	case controller.EventDelete:
		r.stored[inf].Add(-1)
	}
	if e.Key.Name == "" {
		return
	}
	now := r.opts.now().UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.touch(e.Key, now).add(step{at: now, kind: stepEvent, informer: uint8(inf), evType: uint8(typ),
		decision: uint8(dec), initial: e.InitialList, backfill: e.Backfill, rv: e.ResourceVersion})
	if e.Decision == controller.DecisionEnqueued {
		r.markPending(e.Key, now)
	}
}

// Relist counts a relist of informer.
func (r *Recorder) Relist(informer controller.Informer, err error) {
	inf := informerIndex(informer)
	r.relists[inf].Add(1)
	now := r.opts.now().UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastRelistAt[inf] = now
	if err != nil {
		r.lastRelist[inf] = err.Error()
	}
}

// WorkerBusy records that worker took key, and how long key waited.
func (r *Recorder) WorkerBusy(worker int, key cache.ObjectName) {
	now := r.opts.now().UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	var waited int64
	if since, ok := r.pending[key]; ok {
		waited = max(now-since, 0)
		delete(r.pending, key)
	}
	r.busy[key] = busyWorker{worker: worker, since: now}
	r.taken++
	r.touch(key, now).add(step{at: now, kind: stepWorker, worker: int32(worker), dur: waited})
}

// CacheWait records a sync that waits for the cache to reach our write.
func (r *Recorder) CacheWait(key cache.ObjectName, resource, written, read string) {
	now := r.opts.now().UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cacheWaits[resource]++
	r.touch(key, now).add(step{at: now, kind: stepCacheWait, informer: resourceIndex(resource), rv: written, rv2: read})
}

// Wrote records one of our writes and its answer.
func (r *Recorder) Wrote(w controller.APIWrite) {
	now := r.opts.now().UnixNano()
	code := answerCode(w.Verb, w.Err)
	s := step{at: now, kind: stepWrite, informer: resourceIndex(w.Resource), verb: indexOf(verbNames, w.Verb), rv: w.ResourceVersion,
		code: int32(code), dur: int64(w.Duration)}
	if w.Err != nil {
		s.rv2 = w.Err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes[writeKey{verb: w.Verb, resource: w.Resource, code: code}]++
	r.touch(w.Key, now).add(s)
}

// Backoff records a retry's backoff; the sync step that follows reports it.
func (r *Recorder) Backoff(key cache.ObjectName, d time.Duration) {
	now := r.opts.now().UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backoffs++
	r.lastBackoff = d
	r.touch(key, now).backoff = int64(d)
	r.markPending(key, now+int64(d))
}

// Synced records a finished sync; its worker is idle again.
func (r *Recorder) Synced(o controller.SyncOutcome) {
	now := r.opts.now().UnixNano()
	s := step{at: now, kind: stepSync, worker: int32(o.Worker), result: indexOf(resultNames, o.Result), dur: int64(o.Duration),
		delay: int64(o.RequeueAfter), verb: refusalIndex(o.Refusal)}
	if o.Err != nil {
		s.rv2 = o.Err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncs[o.Result]++
	if o.Refusal != "" {
		r.refusals[o.Refusal]++
	}
	delete(r.busy, o.Key)
	j := r.touch(o.Key, now)
	if o.Err != nil {
		s.delay, j.backoff = j.backoff, 0
	}
	j.add(s)
	if o.RequeueAfter > 0 {
		r.markPending(o.Key, now+int64(o.RequeueAfter))
	}
}

// markPending notes that key is queued, ready at readyAt, unless it is
// queued already and ready earlier. The caller holds mu.
func (r *Recorder) markPending(key cache.ObjectName, readyAt int64) {
	if since, ok := r.pending[key]; ok && since <= readyAt {
		return
	}
	if len(r.pending) >= 2*r.opts.MaxBooks {
		return // keys left by a controller that stopped; keep memory bounded
	}
	r.pending[key] = readyAt
}

// answerCode is the HTTP status of a write's answer: the API server's on a
// failure, 0 when none came (a connection error), and for a success the
// code the API answers the verb with.
func answerCode(verb string, err error) int {
	if err == nil {
		if verb == "create" {
			return 201
		}
		return 200
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return int(status.Status().Code)
	}
	return 0
}
