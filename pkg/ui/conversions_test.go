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
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"ydzs.io/book-controller/pkg/webhook"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func review(i int, result string, names ...string) webhook.Review {
	return webhook.Review{At: t0.Add(time.Duration(i) * time.Second), UID: fmt.Sprint("uid-", i), DesiredAPIVersion: "webapp.ydzs.io/v1",
		FromVersions: []string{"webapp.ydzs.io/v2"}, Objects: len(names), Names: names, Result: result, Duration: time.Millisecond}
}

// TestConversionsCountedByResult: every result kind has its counter, and
// one pkg/webhook does not name counts as a panic.
func TestConversionsCountedByResult(t *testing.T) {
	r := newTestRecorder(Options{})
	if f := r.Snapshot(nil).Conversions; f.Serving || f.Reviews != 0 || len(f.Recent) != 0 || len(f.Results) != 4 {
		t.Fatalf("before any review: %+v, want not serving, nothing counted, every result at 0", f)
	}
	r.ConversionWebhookServing()
	r.Reviewed(review(1, webhook.ResultSuccess, "ns/a", "ns/b"))
	r.Reviewed(review(2, webhook.ResultSuccess, "ns/a"))
	r.Reviewed(review(3, webhook.ResultFailure, "ns/c"))
	r.Reviewed(review(4, webhook.ResultBadRequest))
	r.Reviewed(review(5, webhook.ResultPanic, "ns/d"))
	r.Reviewed(review(6, "something else"))
	f := r.Snapshot(nil).Conversions
	want := map[string]int64{"success": 2, "failure": 1, "bad_request": 1, "panic": 2}
	for k, n := range want {
		if f.Results[k] != n {
			t.Errorf("results[%s] = %d, want %d (all: %v)", k, f.Results[k], n, f.Results)
		}
	}
	if !f.Serving || f.Reviews != 6 || f.Objects != 5 || f.Dropped != 0 || len(f.Recent) != 6 {
		t.Errorf("figures %+v, want serving, 6 reviews of 5 objects, none dropped, 6 listed", f)
	}
	if got := f.Recent[0]; got.UID != "uid-6" || f.Recent[5].UID != "uid-1" {
		t.Errorf("recent starts with %s and ends with %s, want the newest (uid-6) first", got.UID, f.Recent[5].UID)
	}
	if got := f.Recent[5]; got.DesiredAPIVersion != "webapp.ydzs.io/v1" || !slices.Equal(got.FromVersions, []string{"webapp.ydzs.io/v2"}) ||
		!slices.Equal(got.Books, []string{"ns/a", "ns/b"}) || got.TookSeconds != 0.001 || got.Result != "success" {
		t.Errorf("the first review as listed: %+v", got)
	}
}

// TestConversionsAreBounded: the oldest reviews are dropped and counted;
// the snapshot lists the latest few.
func TestConversionsAreBounded(t *testing.T) {
	r := newTestRecorder(Options{})
	const n = conversionsKept + 100
	for i := range n {
		r.Reviewed(review(i, webhook.ResultSuccess, "ns/a"))
	}
	f := r.Snapshot(nil).Conversions
	if f.Reviews != n || f.Dropped != 100 || len(f.Recent) != recentConversions || f.Results["success"] != n {
		t.Errorf("after %d reviews: %d counted, %d dropped, %d listed; want %d, 100, %d", n, f.Reviews, f.Dropped, len(f.Recent), n, recentConversions)
	}
	if got, want := f.Recent[0].UID, fmt.Sprint("uid-", n-1); got != want {
		t.Errorf("newest listed %s, want %s", got, want)
	}
	if got := len(r.conversions.kept()); got != conversionsKept {
		t.Errorf("%d reviews kept, want %d", got, conversionsKept)
	}
}

// TestReviewedDoesNotWait: the webhook records a review while the page
// holds the Recorder's lock, and many at once while the page reads.
func TestReviewedDoesNotWait(t *testing.T) {
	r := newTestRecorder(Options{})
	r.mu.Lock()
	done := make(chan struct{})
	go func() {
		r.Reviewed(review(1, webhook.ResultSuccess, "ns/a"))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Reviewed waited for the Recorder's lock")
	}
	r.mu.Unlock()

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 500 {
				r.Reviewed(review(w*1000+i, webhook.ResultSuccess, "ns/a"))
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			r.Snapshot(nil)
		}
	})
	wg.Wait()
	if f := r.Snapshot(nil).Conversions; f.Reviews != 2001 || f.Dropped != 2001-conversionsKept {
		t.Errorf("after 2001 reviews: %d counted, %d dropped", f.Reviews, f.Dropped)
	}
}

// TestJourneyShowsTheBooksConversions: the reviews that name a Book are
// merged into its journey by time, and its echoes still point at their
// writes.
func TestJourneyShowsTheBooksConversions(t *testing.T) {
	r := newTestRecorder(Options{Workers: 1})
	travel(r, demo) // steps at t0+1ms … t0+7ms
	r.Reviewed(webhook.Review{At: t0.Add(2500 * time.Microsecond), DesiredAPIVersion: "webapp.ydzs.io/v1", Objects: 1,
		Names: []string{"default/demo"}, Result: webhook.ResultSuccess, FromVersions: []string{"webapp.ydzs.io/v2"}})
	r.Reviewed(webhook.Review{At: t0.Add(3 * time.Millisecond), Names: []string{"default/other"}, Result: webhook.ResultSuccess})
	r.Reviewed(webhook.Review{At: t0.Add(time.Second), Objects: 2, Names: []string{"default/other", "default/demo"},
		Result: webhook.ResultFailure, Message: "objects[1] default/demo: no"})
	j, ok := r.Journey(demo)
	if !ok {
		t.Fatal("no journey")
	}
	var kinds []string
	for _, s := range j.Path {
		kinds = append(kinds, s.Kind)
	}
	want := []string{"event", "worker", "conversion", "write", "write", "sync", "event", "event", "conversion"}
	if !slices.Equal(kinds, want) || j.Conversions != 2 || j.Steps != 7 {
		t.Fatalf("path %v (%d conversions, %d steps), want %v, 2 conversions, 7 steps", kinds, j.Conversions, j.Steps, want)
	}
	if c := j.Path[2]; c.DesiredAPIVersion != "webapp.ydzs.io/v1" || c.Objects != 1 || c.Result != "success" || !slices.Equal(c.FromVersions, []string{"webapp.ydzs.io/v2"}) {
		t.Errorf("conversion step %+v", c)
	}
	if c := j.Path[8]; c.Result != "failure" || c.Error == "" || c.Objects != 2 {
		t.Errorf("failed conversion step %+v", c)
	}
	for i, wantWrite := range map[int]int{6: 3, 7: 4} {
		if e := j.Path[i].EchoOf; e == nil || *e != wantWrite {
			t.Errorf("step %d echoes %v, want the write at %d", i, e, wantWrite)
		}
	}

	// A journey shows at most StepsPerBook conversions, the latest.
	for i := range 40 {
		r.Reviewed(webhook.Review{At: t0.Add(time.Minute + time.Duration(i)*time.Second), Names: []string{"default/demo"}, Result: webhook.ResultSuccess})
	}
	j, _ = r.Journey(demo)
	if last := j.Path[len(j.Path)-1]; j.Conversions != DefaultStepsPerBook || !last.At.Equal(t0.Add(time.Minute+39*time.Second)) {
		t.Errorf("after 40 more: %d conversions, the last at %v; want %d, the latest", j.Conversions, last.At, DefaultStepsPerBook)
	}
}
