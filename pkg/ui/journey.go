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
	"time"

	"k8s.io/client-go/tools/cache"

	"ydzs.io/book-controller/pkg/controller"
)

// stepKind is what a step records.
type stepKind uint8

const (
	stepEvent     stepKind = iota // a handler's decision on an informer event
	stepWorker                    // a worker took the key from the queue
	stepCacheWait                 // the sync waits for the cache to reach our write
	stepWrite                     // one of our API writes and its answer
	stepSync                      // the sync's outcome
)

var stepKindNames = [...]string{"event", "worker", "cache-wait", "write", "sync"}

// step is one step of a journey, kept small: a Book keeps up to
// StepsPerBook of them. Its strings are the ones the controller handed
// over (resourceVersions, constants), not copies, except error texts.
type step struct {
	at    int64 // UnixNano
	dur   int64 // queue wait (worker), write or sync duration
	delay int64 // sync: the backoff or RequeueAfter that follows
	// rv is the event's or write's resourceVersion, or the one written a
	// cache waits for; rv2 the cache's, or the error text.
	rv, rv2 string
	worker  int32
	code    int32
	kind    stepKind
	// informer is the event's informer, or the resource written or waited
	// for (the informer that watches it).
	informer uint8
	evType   uint8
	decision uint8
	// verb is the write's verb, or for a sync the refusal (indexes of
	// verbNames, refusalNames); result the sync's (of resultNames).
	verb, result uint8
	// initial: the event came with an informer's initial list; backfill:
	// its key was queued behind the live ones.
	initial, backfill bool
}

var (
	verbNames   = []string{"create", "update", "update-status"}
	resultNames = []string{"success", "requeue_after", "error", "conflict"}
	// refusalNames are the Ready reasons of a write the API server refused
	// (pkg/controller/refusal.go); the first is none.
	refusalNames = []string{"", controller.ReasonConfigMapQuotaExceeded, controller.ReasonConfigMapAdmissionDenied,
		controller.ReasonConfigMapAdmissionError, controller.ReasonConfigMapForbidden}
)

// refusalIndex is the index of reason in refusalNames; an unknown reason
// counts as the last, as indexOf does.
func refusalIndex(reason string) uint8 {
	if reason == "" {
		return 0
	}
	return indexOf(refusalNames, reason)
}

// indexOf returns the index of s in names, or of the last name when it is
// not there.
func indexOf(names []string, s string) uint8 {
	for i, n := range names {
		if n == s {
			return uint8(i)
		}
	}
	return uint8(len(names) - 1)
}

// resourceIndex is the informer index of a resource APIWrite names.
func resourceIndex(resource string) uint8 {
	if resource == informerResource[1] {
		return 1
	}
	return 0
}

// journey is one Book's latest steps, a ring of at most StepsPerBook.
type journey struct {
	key   cache.ObjectName
	steps []step
	// head is where the next step goes once steps is full; total counts
	// every step ever added.
	head, total int
	last        int64
	// backoff is the one the rate limiter gave last, for the sync step
	// that follows it.
	backoff    int64
	prev, next *journey
}

func (j *journey) add(s step) {
	j.total++
	if len(j.steps) < cap(j.steps) {
		j.steps = append(j.steps, s)
		return
	}
	j.steps[j.head] = s
	j.head = (j.head + 1) % len(j.steps)
}

// ordered returns the steps oldest first.
func (j *journey) ordered() []step {
	out := make([]step, 0, len(j.steps))
	out = append(out, j.steps[j.head:]...)
	return append(out, j.steps[:j.head]...)
}

// journeyList is a doubly linked list of journeys, most recent first.
type journeyList struct{ front, back *journey }

func (l *journeyList) remove(j *journey) {
	if j.prev != nil {
		j.prev.next = j.next
	} else {
		l.front = j.next
	}
	if j.next != nil {
		j.next.prev = j.prev
	} else {
		l.back = j.prev
	}
	j.prev, j.next = nil, nil
}

func (l *journeyList) pushFront(j *journey) {
	j.next = l.front
	if l.front != nil {
		l.front.prev = j
	}
	l.front = j
	if l.back == nil {
		l.back = j
	}
}

// touch returns key's journey, made the most recent, creating it (and
// dropping the least recent beyond MaxBooks) if need be. The caller holds mu.
func (r *Recorder) touch(key cache.ObjectName, now int64) *journey {
	j, ok := r.books[key]
	if ok {
		r.lru.remove(j)
	} else {
		if len(r.books) >= r.opts.MaxBooks {
			oldest := r.lru.back
			r.lru.remove(oldest)
			delete(r.books, oldest.key)
		}
		j = &journey{key: key, steps: make([]step, 0, r.opts.StepsPerBook)}
		r.books[key] = j
	}
	j.last = now
	r.lru.pushFront(j)
	return j
}

// Step is one step of a Book's journey as /api/journeys returns it.
type Step struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"`
	// Event: which informer, the notification's type, the object's
	// resourceVersion and the handler's decision. EchoOf is the index, in
	// this journey, of the write whose echo this event is.
	Informer    string `json:"informer,omitempty"`
	Type        string `json:"type,omitempty"`
	InitialList bool   `json:"initialList,omitempty"`
	// Queued says, for an enqueued event, which line of the live-first
	// queue the key joined: "live", or "backfill" (an initial list's key,
	// handed out after every live one; pkg/controller/livefirst.go).
	Queued          string `json:"queued,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Decision        string `json:"decision,omitempty"`
	EchoOf          *int   `json:"echoOf,omitempty"`
	// Worker: which worker, and how long the key waited in the queue.
	Worker        *int    `json:"worker,omitempty"`
	WaitedSeconds float64 `json:"waitedSeconds,omitempty"`
	// Write: what was written, the answer's code (0: none came) and error.
	Resource string `json:"resource,omitempty"`
	Verb     string `json:"verb,omitempty"`
	Code     int    `json:"code,omitempty"`
	Error    string `json:"error,omitempty"`
	// Cache wait: the store's resourceVersion, behind ResourceVersion.
	CacheAt string `json:"cacheResourceVersion,omitempty"`
	// Sync: the result label, how long it took, and the backoff (after an
	// error or conflict) or RequeueAfter that follows.
	Result string `json:"result,omitempty"`
	// Refusal is the Ready reason of a write the API server refused for
	// good (quota, admission, RBAC): retried with backoff, capped at the
	// conflict recheck.
	Refusal        string  `json:"refusal,omitempty"`
	TookSeconds    float64 `json:"tookSeconds,omitempty"`
	BackoffSeconds float64 `json:"backoffSeconds,omitempty"`
	RequeueAfter   float64 `json:"requeueAfterSeconds,omitempty"`
	// fork:begin v2
	// Conversion (a ConversionReview that named this Book, conversions.go):
	// the version asked for, the objects' versions, how many objects the
	// review held; its Result, Error and TookSeconds.
	DesiredAPIVersion string   `json:"desiredAPIVersion,omitempty"`
	FromVersions      []string `json:"fromVersions,omitempty"`
	Objects           int      `json:"objects,omitempty"`
	// fork:end v2
}

// Journey is a Book's recent steps, oldest first.
type Journey struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Steps counts every step recorded; Dropped those no longer kept.
	Steps   int    `json:"steps"`
	Dropped int    `json:"dropped"`
	Path    []Step `json:"path"`
	// fork:begin v2

	// Conversions counts the conversion steps in Path: not among Steps,
	// they are merged in from the webhook's reviews kept.
	Conversions int `json:"conversions,omitempty"`
	// fork:end v2
}

// Journey returns key's journey, or false when none is kept.
func (r *Recorder) Journey(key cache.ObjectName) (Journey, bool) {
	r.mu.Lock()
	j, ok := r.books[key]
	var steps []step
	var total int
	if ok {
		steps, total = j.ordered(), j.total
	}
	r.mu.Unlock()
	if !ok {
		return Journey{}, false
	}
	out := Journey{Namespace: key.Namespace, Name: key.Name, Steps: total, Dropped: total - len(steps)}
	// The echo of a write can come before the write's answer: the watch
	// and the response race, and ownWrites holds the event back meanwhile.
	writes := map[string]int{} // resource/resourceVersion of a write → its index
	for i, s := range steps {
		if s.kind == stepWrite && s.rv != "" {
			writes[informerResource[s.informer]+"/"+s.rv] = i
		}
	}
	for _, s := range steps {
		st := s.export()
		if w, ok := writes[informerResource[s.informer]+"/"+s.rv]; ok && s.kind == stepEvent && s.rv != "" {
			st.EchoOf = &w
		}
		out.Path = append(out.Path, st)
	}
	// fork:begin v2
	conv := r.conversions.conversionSteps(key, r.opts.StepsPerBook)
	out.Conversions, out.Path = len(conv), mergeByTime(out.Path, conv)
	// fork:end v2
	return out, true
}

// informerResource is the resource each informer watches, as APIWrite
// names it.
var informerResource = [numInformers]string{"books.webapp.ydzs.io", "configmaps", ""}

func (s step) export() Step {
	out := Step{At: time.Unix(0, s.at).UTC(), Kind: stepKindNames[s.kind]}
	switch s.kind {
	case stepEvent:
		out.Informer, out.Type, out.Decision = informerNames[s.informer], eventTypeNames[s.evType], decisionNames[s.decision]
		out.InitialList, out.ResourceVersion = s.initial, s.rv
		if s.decision == 0 { // enqueued
			out.Queued = "live"
			if s.backfill {
				out.Queued = "backfill"
			}
		}
	case stepWorker:
		w := int(s.worker)
		out.Worker, out.WaitedSeconds = &w, seconds(s.dur)
	case stepCacheWait:
		out.Resource, out.ResourceVersion, out.CacheAt = informerResource[s.informer], s.rv, s.rv2
	case stepWrite:
		out.Resource, out.Verb, out.ResourceVersion, out.Code, out.Error = informerResource[s.informer], verbNames[s.verb], s.rv, int(s.code), s.rv2
		out.TookSeconds = seconds(s.dur)
	case stepSync:
		w := int(s.worker)
		out.Worker, out.Result, out.Error, out.TookSeconds = &w, resultNames[s.result], s.rv2, seconds(s.dur)
		out.Refusal = refusalNames[s.verb]
		if s.rv2 != "" {
			out.BackoffSeconds = seconds(s.delay)
		} else {
			out.RequeueAfter = seconds(s.delay)
		}
	}
	return out
}

func seconds(ns int64) float64 { return time.Duration(ns).Seconds() }

var (
	informerNames  = [numInformers]string{string(controller.BooksInformer), string(controller.ConfigMapsInformer), ""}
	eventTypeNames = [numEventTypes]string{string(controller.EventAdd), string(controller.EventUpdate), string(controller.EventDelete), string(controller.EventReleased)}
	decisionNames  = [numDecisions]string{string(controller.DecisionEnqueued), string(controller.DecisionEcho), string(controller.DecisionResync), string(controller.DecisionInvalid)}
)

// informerIndex, eventTypeIndex and decisionIndex are the indexes of the
// counters' dimensions; anything unknown counts as the last name (no
// informer, a released event, an invalid object).
func informerIndex(i controller.Informer) int   { return int(indexOf(informerNames[:], string(i))) }
func eventTypeIndex(t controller.EventType) int { return int(indexOf(eventTypeNames[:], string(t))) }
func decisionIndex(d controller.Decision) int   { return int(indexOf(decisionNames[:], string(d))) }
