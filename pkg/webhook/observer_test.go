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

package webhook

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// reviews is an Observer that keeps what it is told.
type reviews struct {
	mu  sync.Mutex
	got []Review
}

func (r *reviews) Reviewed(rv Review) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rv)
}

func (r *reviews) last(t *testing.T) Review {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		t.Fatal("the observer was told of no review")
	}
	return r.got[len(r.got)-1]
}

// TestObserverToldOfEachResult: each kind of answer reaches the observer
// with its versions, objects, result and reason.
func TestObserverToldOfEachResult(t *testing.T) {
	h, _ := newTestHandler()
	obs := &reviews{}
	h.SetObserver(obs)

	var objs []runtime.RawExtension
	for i := range 7 {
		objs = append(objs, raw(t, v2Book(fmt.Sprintf("b%d", i))))
	}
	if code, _, body := post(t, h, reviewBody(t, v1Version, objs...)); code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	got := obs.last(t)
	wantNames := []string{"ns/b0", "ns/b1", "ns/b2", "ns/b3", "ns/b4"}
	if got.Result != ResultSuccess || got.DesiredAPIVersion != v1Version || !slices.Equal(got.FromVersions, []string{v2Version}) ||
		got.Objects != 7 || !slices.Equal(got.Names, wantNames) || got.UID != "uid-1" || got.Message != "" || got.Duration <= 0 || got.At.IsZero() {
		t.Errorf("success: %+v, want v2 → v1, 7 objects, names %v (capped at %d)", got, wantNames, MaxReviewNames)
	}

	mixed := []runtime.RawExtension{raw(t, v2Book("a")), {Raw: []byte(`{"apiVersion":"apps/v1","kind":"Book","metadata":{"namespace":"ns","name":"x"}}`)}}
	post(t, h, reviewBody(t, v1Version, mixed...))
	got = obs.last(t)
	if got.Result != ResultFailure || !slices.Equal(got.FromVersions, []string{v2Version, "apps/v1"}) ||
		!strings.Contains(got.Message, "objects[1] ns/x") || got.Objects != 2 {
		t.Errorf("failure: %+v, want both versions and the refused object named", got)
	}

	req := httptest.NewRequest(http.MethodGet, Path, nil)
	h.ServeHTTP(httptest.NewRecorder(), req)
	got = obs.last(t)
	if got.Result != ResultBadRequest || !strings.Contains(got.Message, "only POST") || got.Objects != 0 || got.UID != "" {
		t.Errorf("bad request: %+v, want the refusal's message and no objects", got)
	}

	h.convert = func([]byte, string) ([]byte, error) { panic("boom") }
	post(t, h, reviewBody(t, v2Version, raw(t, v2Book("p"))))
	got = obs.last(t)
	if got.Result != ResultPanic || !strings.Contains(got.Message, "boom") || !slices.Equal(got.Names, []string{"ns/p"}) {
		t.Errorf("panic: %+v, want the panic named, with the object", got)
	}
	if n := len(obs.got); n != 4 {
		t.Errorf("the observer was told of %d reviews, want 4", n)
	}
}

// TestNoObserver: the handler serves without one, and SetObserver(nil)
// turns it off again.
func TestNoObserver(t *testing.T) {
	h, _ := newTestHandler()
	obs := &reviews{}
	h.SetObserver(obs)
	h.SetObserver(nil)
	if code, _, body := post(t, h, reviewBody(t, v1Version, raw(t, v2Book("a")))); code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	if len(obs.got) != 0 {
		t.Errorf("told of %d reviews after SetObserver(nil)", len(obs.got))
	}
}
