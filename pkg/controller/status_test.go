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
	"encoding/json"
	"reflect"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

func readyOf(t *testing.T, s webappv2.BookStatus) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(s.Conditions, ConditionReady)
	if c == nil {
		t.Fatalf("no Ready condition in %+v", s.Conditions)
	}
	return *c
}

func TestComputeStatusFresh(t *testing.T) {
	book := newBook("demo", 3, "T", 1)
	before := book.DeepCopy()
	now := t0.Add(1500 * time.Millisecond) // sub-second part must be dropped

	got := computeStatus(book, readyCondition(book), now)

	if !apiequality.Semantic.DeepEqual(book, before) {
		t.Error("computeStatus modified the Book")
	}
	if got.ObservedGeneration != 3 || got.ConfigMapName != "demo" || len(got.Conditions) != 1 {
		t.Errorf("status: got %+v", got)
	}
	c := readyOf(t, got)
	if c.Status != metav1.ConditionTrue || c.Reason != ReasonConfigMapReady || c.ObservedGeneration != 3 || c.Message == "" {
		t.Errorf("Ready: got %+v", c)
	}
	if want := t0.Add(time.Second); !c.LastTransitionTime.Time.Equal(want) {
		t.Errorf("lastTransitionTime: got %v, want %v (rounded to seconds)", c.LastTransitionTime, want)
	}

	// What the API server stores and sends back is equal to what we computed,
	// so the next sync sees nothing to write.
	raw, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var roundTripped webappv2.BookStatus
	if err := json.Unmarshal(raw, &roundTripped); err != nil {
		t.Fatal(err)
	}
	if !statusEqual(got, roundTripped) {
		t.Errorf("status differs from its JSON round trip:\n%+v\n%+v", got, roundTripped)
	}
}

func TestComputeStatusUnchangedWorldIsEqual(t *testing.T) {
	book := withReadyStatus(newBook("demo", 5, "T", 1), t0)
	got := computeStatus(book, readyCondition(book), t0.Add(time.Hour))
	if !statusEqual(book.Status, got) {
		t.Errorf("status changed although nothing did:\nold %+v\nnew %+v", book.Status, got)
	}

	conflicted := newBook("demo", 5, "T", 1)
	conflicted.Status = computeStatus(conflicted, conflictCondition(conflicted), t0)
	again := computeStatus(conflicted, conflictCondition(conflicted), t0.Add(time.Hour))
	if !statusEqual(conflicted.Status, again) {
		t.Errorf("conflict status changed on a recheck:\nold %+v\nnew %+v", conflicted.Status, again)
	}
}

func TestComputeStatusNewGenerationKeepsTransitionTime(t *testing.T) {
	book := withReadyStatus(newBook("demo", 1, "T", 1), t0)
	book.Generation = 2

	got := computeStatus(book, readyCondition(book), t0.Add(time.Hour))

	if got.ObservedGeneration != 2 {
		t.Errorf("observedGeneration: got %d, want 2", got.ObservedGeneration)
	}
	c := readyOf(t, got)
	if c.ObservedGeneration != 2 {
		t.Errorf("Ready.observedGeneration: got %d, want 2", c.ObservedGeneration)
	}
	if !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("lastTransitionTime moved although Ready stayed True: got %v, want %v", c.LastTransitionTime, t0)
	}
	if book.Status.ObservedGeneration != 1 || book.Status.Conditions[0].ObservedGeneration != 1 {
		t.Error("computeStatus modified the Book's status")
	}
}

func TestComputeStatusTransitions(t *testing.T) {
	book := withReadyStatus(newBook("demo", 1, "T", 1), t0)
	later := t0.Add(time.Minute)

	toConflict := computeStatus(book, conflictCondition(book), later)
	c := readyOf(t, toConflict)
	if c.Status != metav1.ConditionFalse || c.Reason != ReasonConfigMapConflict {
		t.Errorf("Ready: got %s/%s, want False/%s", c.Status, c.Reason, ReasonConfigMapConflict)
	}
	if !c.LastTransitionTime.Time.Equal(later) {
		t.Errorf("lastTransitionTime: got %v, want %v", c.LastTransitionTime, later)
	}
	if len(toConflict.Conditions) != 1 {
		t.Errorf("conditions: got %d, want 1", len(toConflict.Conditions))
	}

	book.Status = toConflict
	evenLater := later.Add(time.Minute)
	back := computeStatus(book, readyCondition(book), evenLater)
	c = readyOf(t, back)
	if c.Status != metav1.ConditionTrue || c.Reason != ReasonConfigMapReady {
		t.Errorf("Ready: got %s/%s, want True/%s", c.Status, c.Reason, ReasonConfigMapReady)
	}
	if !c.LastTransitionTime.Time.Equal(evenLater) {
		t.Errorf("lastTransitionTime: got %v, want %v", c.LastTransitionTime, evenLater)
	}
}

func TestComputeStatusKeepsOtherConditions(t *testing.T) {
	book := withReadyStatus(newBook("demo", 1, "T", 1), t0)
	other := metav1.Condition{Type: "Archived", Status: metav1.ConditionFalse, Reason: "NotYet", Message: "m", LastTransitionTime: metav1.NewTime(t0)}
	book.Status.Conditions = append(book.Status.Conditions, other)

	got := computeStatus(book, readyCondition(book), t0.Add(time.Hour))
	if !statusEqual(book.Status, got) {
		t.Errorf("status changed:\nold %+v\nnew %+v", book.Status, got)
	}
	if c := meta.FindStatusCondition(got.Conditions, "Archived"); c == nil || *c != other {
		t.Errorf("other condition: got %+v, want %+v", c, other)
	}
}

func TestStatusEqualIgnoresTimeZone(t *testing.T) {
	a := withReadyStatus(newBook("demo", 1, "T", 1), t0).Status
	b := *a.DeepCopy()
	b.Conditions[0].LastTransitionTime = metav1.NewTime(t0.In(time.FixedZone("CET", 3600)))
	if !statusEqual(a, b) {
		t.Error("statuses differing only in time zone compare unequal")
	}
	b.ConfigMapName = "other"
	if statusEqual(a, b) {
		t.Error("statuses with different configMapName compare equal")
	}
}

// FuzzStatusEqual holds statusEqual to equality.Semantic.DeepEqual, which it
// replaces on the hot path: two statuses built from the fuzzer's choices,
// from small sets so that equal ones are common.
func FuzzStatusEqual(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 2, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Add([]byte{1, 1, 2, 0, 1, 0, 1, 0, 1, 1, 2, 0, 1, 0, 1, 0, 1, 1, 0})
	f.Fuzz(func(t *testing.T, choices []byte) {
		next := func(n int) int {
			if len(choices) == 0 {
				return 0
			}
			c := int(choices[0]) % n
			choices = choices[1:]
			return c
		}
		strs := []string{"", "a", "b"}
		build := func() webappv2.BookStatus {
			s := webappv2.BookStatus{ObservedGeneration: int64(next(2)), ConfigMapName: strs[next(3)]}
			switch next(3) {
			case 1:
				s.Conditions = []metav1.Condition{}
			case 2:
				for range 1 + next(2) {
					s.Conditions = append(s.Conditions, metav1.Condition{
						Type: strs[next(3)], Status: metav1.ConditionStatus(strs[next(3)]),
						ObservedGeneration: int64(next(2)), Reason: strs[next(3)], Message: strs[next(3)],
						// The same instant in two zones, or another second.
						LastTransitionTime: metav1.NewTime(t0.Add(time.Duration(next(2)) * time.Second).
							In(time.FixedZone("z", 3600*next(2)))),
					})
				}
			}
			return s
		}
		a, b := build(), build()
		if got, want := statusEqual(a, b), apiequality.Semantic.DeepEqual(a, b); got != want {
			t.Errorf("statusEqual = %v, equality.Semantic.DeepEqual = %v, for\n%+v\n%+v", got, want, a, b)
		}
	})
}

// TestStatusEqualKnowsEveryField fails when BookStatus or metav1.Condition
// gains a field, which statusEqual must then compare too.
func TestStatusEqualKnowsEveryField(t *testing.T) {
	if n := reflect.TypeFor[webappv2.BookStatus]().NumField(); n != 3 {
		t.Errorf("BookStatus has %d fields; statusEqual compares 3: teach it the new one", n)
	}
	if n := reflect.TypeFor[metav1.Condition]().NumField(); n != 6 {
		t.Errorf("metav1.Condition has %d fields; statusEqual compares 6: teach it the new one", n)
	}
}
