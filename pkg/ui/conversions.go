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
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/cache"

	"ydzs.io/book-controller/pkg/webhook"
)

// The conversion webhook's box: the ConversionReviews the API server sent
// (pkg/webhook's Observer), beside the pipeline, since it is the API server
// that calls, whenever a client, the controller's own informer included,
// reads or writes a Book in a version other than the stored one.

const (
	// conversionsKept is how many of the latest reviews are kept; an
	// older one is dropped, and counted, as a new one comes.
	conversionsKept = 256
	// recentConversions is how many of them a snapshot lists.
	recentConversions = 12
)

// conversionResults are pkg/webhook's results, the counters' index.
var conversionResults = []string{webhook.ResultSuccess, webhook.ResultFailure, webhook.ResultBadRequest, webhook.ResultPanic}

// keptReview is a review and its place in the order of arrival.
type keptReview struct {
	seq uint64
	webhook.Review
}

// conversionLog keeps the latest reviews in a ring of atomic pointers: the
// webhook, which the API server waits on, never waits for a lock the page
// holds. A reader may see a slot a moment before its newer review lands
// in it; the order of arrival sorts it out.
type conversionLog struct {
	serving atomic.Bool
	next    atomic.Uint64
	slots   [conversionsKept]atomic.Pointer[keptReview]
	results [4]atomic.Int64
	objects atomic.Int64
}

var _ webhook.Observer = (*Recorder)(nil)

// Reviewed records one of the conversion webhook's reviews, without a lock.
// A result pkg/webhook does not name counts as the last, a panic.
func (r *Recorder) Reviewed(rv webhook.Review) {
	c := &r.conversions
	c.results[indexOf(conversionResults, rv.Result)].Add(1)
	c.objects.Add(int64(rv.Objects))
	seq := c.next.Add(1)
	c.slots[(seq-1)%conversionsKept].Store(&keptReview{seq: seq, Review: rv})
}

// ConversionWebhookServing tells the page that this process serves the
// conversion webhook (the Book CRD converts through it: crd.yaml).
func (r *Recorder) ConversionWebhookServing() { r.conversions.serving.Store(true) }

// kept returns the reviews kept, newest first.
func (c *conversionLog) kept() []*keptReview {
	out := make([]*keptReview, 0, conversionsKept)
	for i := range c.slots {
		if k := c.slots[i].Load(); k != nil {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq > out[j].seq })
	return out
}

// ConversionFigures are the conversion webhook's: whether this process
// serves it, the reviews it answered by result, the objects they held,
// and the latest reviews, newest first.
type ConversionFigures struct {
	Serving bool             `json:"serving"`
	Reviews int64            `json:"reviews"`
	Objects int64            `json:"objects"`
	Results map[string]int64 `json:"results"`
	// Dropped counts the reviews no longer kept: only the latest 256 are,
	// for Recent and the journeys.
	Dropped int64              `json:"dropped"`
	Recent  []ConversionReview `json:"recent"`
}

// ConversionReview is one review the API server sent, and its answer.
type ConversionReview struct {
	At  time.Time `json:"at"`
	UID string    `json:"uid,omitempty"`
	// DesiredAPIVersion is the version asked for, FromVersions the
	// objects'.
	DesiredAPIVersion string   `json:"desiredAPIVersion,omitempty"`
	FromVersions      []string `json:"fromVersions,omitempty"`
	Objects           int      `json:"objects"`
	// Books are the namespace/name of the first five objects.
	Books []string `json:"books,omitempty"`
	// Result is success, failure, bad_request or panic; Message why, for
	// any but a success.
	Result      string  `json:"result"`
	Message     string  `json:"message,omitempty"`
	TookSeconds float64 `json:"tookSeconds"`
}

// figures reads the counters and the latest reviews.
func (c *conversionLog) figures() ConversionFigures {
	f := ConversionFigures{Serving: c.serving.Load(), Objects: c.objects.Load(), Results: map[string]int64{}}
	for i, name := range conversionResults {
		f.Results[name] = c.results[i].Load()
	}
	kept := c.kept()
	f.Reviews = int64(c.next.Load())
	f.Dropped = max(f.Reviews-int64(len(kept)), 0)
	for _, k := range kept[:min(len(kept), recentConversions)] {
		f.Recent = append(f.Recent, k.export())
	}
	return f
}

func (k *keptReview) export() ConversionReview {
	return ConversionReview{At: k.At.UTC(), UID: k.UID, DesiredAPIVersion: k.DesiredAPIVersion, FromVersions: k.FromVersions,
		Objects: k.Objects, Books: k.Names, Result: k.Result, Message: k.Message, TookSeconds: k.Duration.Seconds()}
}

// conversionSteps are the latest kept reviews that name key, at most
// limit (a journey's own steps are bounded alike), oldest first, as steps
// of its journey.
func (c *conversionLog) conversionSteps(key cache.ObjectName, limit int) []Step {
	var out []Step
	name := key.String()
	for _, k := range c.kept() {
		if len(out) == limit {
			break
		}
		if slices.Contains(k.Names, name) {
			out = append(out, Step{At: k.At.UTC(), Kind: stepConversion, Result: k.Result, Error: k.Message,
				TookSeconds: k.Duration.Seconds(), DesiredAPIVersion: k.DesiredAPIVersion, FromVersions: k.FromVersions, Objects: k.Objects})
		}
	}
	slices.Reverse(out)
	return out
}

// stepConversion is the kind of a journey's conversion step: not recorded
// with the Book's steps but merged in from the reviews kept.
const stepConversion = "conversion"

// mergeByTime merges conv into path by time, a step of path first on a
// tie, and points each echo at its write's new index.
func mergeByTime(path, conv []Step) []Step {
	if len(conv) == 0 {
		return path
	}
	out := make([]Step, 0, len(path)+len(conv))
	moved := make([]int, len(path))
	i, j := 0, 0
	for i < len(path) || j < len(conv) {
		if j == len(conv) || (i < len(path) && !conv[j].At.Before(path[i].At)) {
			moved[i] = len(out)
			out = append(out, path[i])
			i++
			continue
		}
		out = append(out, conv[j])
		j++
	}
	for k := range out {
		if e := out[k].EchoOf; e != nil {
			n := moved[*e]
			out[k].EchoOf = &n
		}
	}
	return out
}
