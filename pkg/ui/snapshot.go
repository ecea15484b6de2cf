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
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Snapshot is every figure the page draws: GET /api/snapshot, and each
// Server-Sent Event.
type Snapshot struct {
	Time time.Time `json:"time"`
	// SourceURL is the base of the page's links to source files
	// (--ui-source-url); empty: the page's default.
	SourceURL string                     `json:"sourceURL,omitempty"`
	Informers map[string]InformerFigures `json:"informers"`
	Handlers  map[string]int64           `json:"handlers"`
	Queue     QueueFigures               `json:"queue"`
	Workers   WorkerFigures              `json:"workers"`
	Syncs     map[string]int64           `json:"syncs"`
	// Refusals counts the syncs whose ConfigMap write the API server
	// refused for good, by the Ready reason (they count as "error" in
	// Syncs too).
	Refusals   map[string]int64 `json:"refusals"`
	CacheWaits map[string]int64 `json:"cacheWaits"`
	Writes     []WriteCount     `json:"writes"`
	// Requests counts every request this process's clients sent, by
	// answer code ("<error>": no answer), from client-go's
	// rest_client_requests_total (pkg/metrics/clientgo.go): reads, watches,
	// Leases and Events too. While the API server is down, the "<error>"
	// count grows ever slower: the Reflectors back off.
	Requests      map[string]float64 `json:"requests"`
	Leadership    Leadership         `json:"leadership"`
	Books         []BookSummary      `json:"books"`
	BooksTracked  int                `json:"booksTracked"`
	GatherProblem string             `json:"gatherProblem,omitempty"`
	// fork:begin v2

	// Conversions are the conversion webhook's reviews (conversions.go).
	Conversions ConversionFigures `json:"conversions"`
	// fork:end v2
}

// InformerFigures are one informer's: the events its handler heard by
// type, the adds of its initial list, its relists, and the objects in its
// store (adds less deletes the handler heard).
type InformerFigures struct {
	Events      map[string]int64 `json:"events"`
	InitialList int64            `json:"initialList"`
	// Backfill counts the initial list's keys queued behind the live ones
	// (the live-first order; 0 with --live-first=false).
	Backfill        int64  `json:"backfill"`
	Relists         int64  `json:"relists"`
	Stored          int64  `json:"stored"`
	LastRelistError string `json:"lastRelistError,omitempty"`
	// LastRelistAgoSeconds is how long ago the last relist began.
	LastRelistAgoSeconds float64 `json:"lastRelistAgoSeconds,omitempty"`
}

// QueueFigures are the work queue's: depth, adds, retries, the longest
// running sync and the unfinished work from client-go's workqueue metrics
// (pkg/metrics/workqueue.go); the mean wait from its queue-duration
// histogram; the longest wait of a key queued now and the backoffs handed
// out from the Recorder.
type QueueFigures struct {
	Depth                 float64 `json:"depth"`
	Adds                  float64 `json:"adds"`
	Retries               float64 `json:"retries"`
	MeanWaitSeconds       float64 `json:"meanWaitSeconds"`
	LongestWaitSeconds    float64 `json:"longestWaitSeconds"`
	LongestRunningSeconds float64 `json:"longestRunningSeconds"`
	UnfinishedWorkSeconds float64 `json:"unfinishedWorkSeconds"`
	Backoffs              int64   `json:"backoffs"`
	LastBackoffSeconds    float64 `json:"lastBackoffSeconds"`
}

// WorkerFigures are the workers: how many (with shards, in all the shards
// held), and the busy ones. With shards, worker numbers repeat: each
// shard's controller numbers its own.
type WorkerFigures struct {
	Total int `json:"total"`
	// Taken counts the keys the workers have taken from the queue.
	Taken int64        `json:"taken"`
	Busy  []BusyWorker `json:"busy"`
}

// BusyWorker is a worker in a sync: of which Book, for how long.
type BusyWorker struct {
	Worker       int     `json:"worker"`
	Book         string  `json:"book"`
	SinceSeconds float64 `json:"sinceSeconds"`
}

// WriteCount counts our writes by verb, resource and answer code.
type WriteCount struct {
	Verb     string `json:"verb"`
	Resource string `json:"resource"`
	Code     int    `json:"code"`
	Count    int64  `json:"count"`
}

// Leadership is what the manager's metrics say of the Leases: held or not,
// per Lease, and with shards how many are held.
type Leadership struct {
	Leading    bool            `json:"leading"`
	Leases     map[string]bool `json:"leases"`
	ShardsHeld *int            `json:"shardsHeld,omitempty"`
}

// BookSummary is a Book with a recent journey.
type BookSummary struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Last      time.Time `json:"last"`
	Steps     int       `json:"steps"`
}

// recentBooks is how many Books a snapshot lists.
const recentBooks = 50

// Snapshot returns the figures now; gather (the process's and the
// manager's Prometheus registries) supplies the queue's and the Leases'.
func (r *Recorder) Snapshot(gather prometheus.Gatherer) Snapshot {
	now := r.opts.now()
	s := Snapshot{Time: now.UTC(), SourceURL: r.opts.SourceURL, Informers: map[string]InformerFigures{}, Handlers: map[string]int64{}}
	r.countEvents(&s)
	r.snapshotLocked(&s, now.UnixNano())
	s.Conversions = r.conversions.figures() // fork:line v2
	if gather != nil {
		families, err := gather.Gather()
		if err != nil {
			s.GatherProblem = err.Error()
		}
		fromMetrics(&s, families)
	}
	if s.Leadership.ShardsHeld != nil {
		// Each shard held runs a controller with its own workers.
		s.Workers.Total *= *s.Leadership.ShardsHeld
	}
	return s
}

// countEvents reads the atomic counters.
func (r *Recorder) countEvents(s *Snapshot) {
	for inf := range 2 {
		f := InformerFigures{Events: map[string]int64{}, InitialList: r.initial[inf].Load(), Backfill: r.backfill[inf].Load(),
			Relists: r.relists[inf].Load(), Stored: r.stored[inf].Load()}
		for typ := range numEventTypes - 1 {
			for dec := range numDecisions {
				f.Events[eventTypeNames[typ]] += r.events[inf][typ][dec].Load()
			}
		}
		s.Informers[informerNames[inf]] = f
	}
	for inf := range numInformers {
		for typ := range numEventTypes {
			for dec := range numDecisions {
				s.Handlers[decisionNames[dec]] += r.events[inf][typ][dec].Load()
			}
		}
	}
	// Released events are enqueued too; they are also counted apart.
	for dec := range numDecisions {
		s.Handlers["released"] += r.events[numInformers-1][numEventTypes-1][dec].Load()
	}
}

// snapshotLocked copies what mu guards.
func (r *Recorder) snapshotLocked(s *Snapshot, now int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.Syncs, s.Refusals, s.CacheWaits = copyMap(r.syncs), copyMap(r.refusals), copyMap(r.cacheWaits)
	for k, n := range r.writes {
		s.Writes = append(s.Writes, WriteCount{Verb: k.verb, Resource: k.resource, Code: k.code, Count: n})
	}
	sort.Slice(s.Writes, func(i, j int) bool { return s.Writes[i].Count > s.Writes[j].Count })
	for _, since := range r.pending {
		s.Queue.LongestWaitSeconds = max(s.Queue.LongestWaitSeconds, seconds(now-since))
	}
	s.Queue.Backoffs, s.Queue.LastBackoffSeconds = r.backoffs, r.lastBackoff.Seconds()
	s.Workers.Total, s.Workers.Taken = r.opts.Workers, r.taken
	for key, b := range r.busy {
		s.Workers.Busy = append(s.Workers.Busy, BusyWorker{Worker: b.worker, Book: key.String(), SinceSeconds: seconds(now - b.since)})
	}
	sort.Slice(s.Workers.Busy, func(i, j int) bool { return s.Workers.Busy[i].Worker < s.Workers.Busy[j].Worker })
	for inf := range 2 {
		f := s.Informers[informerNames[inf]]
		f.LastRelistError = r.lastRelist[inf]
		if at := r.lastRelistAt[inf]; at != 0 {
			f.LastRelistAgoSeconds = seconds(now - at)
		}
		s.Informers[informerNames[inf]] = f
	}
	s.BooksTracked = len(r.books)
	for j := r.lru.front; j != nil && len(s.Books) < recentBooks; j = j.next {
		s.Books = append(s.Books, BookSummary{Namespace: j.key.Namespace, Name: j.key.Name,
			Last: time.Unix(0, j.last).UTC(), Steps: j.total})
	}
}

func copyMap[K comparable](m map[K]int64) map[K]int64 {
	out := make(map[K]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// fromMetrics reads the figures client-go's hooks and the manager already
// keep, by their metric names.
func fromMetrics(s *Snapshot, families []*dto.MetricFamily) {
	s.Leadership.Leases = map[string]bool{}
	s.Requests = map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "workqueue_depth":
				s.Queue.Depth += m.GetGauge().GetValue()
			case "workqueue_adds_total":
				s.Queue.Adds += m.GetCounter().GetValue()
			case "workqueue_retries_total":
				s.Queue.Retries += m.GetCounter().GetValue()
			case "workqueue_longest_running_processor_seconds":
				s.Queue.LongestRunningSeconds = max(s.Queue.LongestRunningSeconds, m.GetGauge().GetValue())
			case "workqueue_unfinished_work_seconds":
				s.Queue.UnfinishedWorkSeconds += m.GetGauge().GetValue()
			case "workqueue_queue_duration_seconds":
				if h := m.GetHistogram(); h.GetSampleCount() > 0 {
					s.Queue.MeanWaitSeconds = h.GetSampleSum() / float64(h.GetSampleCount())
				}
			case "rest_client_requests_total":
				s.Requests[labelValue(m, "code")] += m.GetCounter().GetValue()
			case "leader_election_master_status":
				held := m.GetGauge().GetValue() == 1
				s.Leadership.Leases[labelValue(m, "name")] = held
				s.Leadership.Leading = s.Leadership.Leading || held
			case "book_controller_shards_held":
				n := int(m.GetGauge().GetValue())
				s.Leadership.ShardsHeld = &n
			}
		}
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
