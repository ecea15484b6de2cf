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
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

// blockingObserver holds each review until released.
type blockingObserver struct{ release chan struct{} }

func (o blockingObserver) Reviewed(Review) { <-o.release }

// TestAnswerDoesNotWaitForTheObserver: over HTTP, the API server has the
// whole answer while the observer still holds the review.
func TestAnswerDoesNotWaitForTheObserver(t *testing.T) {
	h, _ := newTestHandler()
	obs := blockingObserver{release: make(chan struct{})}
	h.SetObserver(obs)
	srv := httptest.NewServer(h.Mux())
	defer srv.Close()
	defer close(obs.release) // before srv.Close, which waits for the handler

	answered := make(chan error, 1)
	go func() {
		resp, err := srv.Client().Post(srv.URL+Path, "application/json", bytes.NewReader(reviewBody(t, v1Version, raw(t, v2Book("a")))))
		if err == nil {
			var body []byte
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && (resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"status":"Success"`)) {
				err = fmt.Errorf("%s: %s", resp.Status, body)
			}
		}
		answered <- err
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the answer waited for the observer")
	}
}

type discard struct{}

func (discard) Reviewed(Review) {}

// BenchmarkReview100Books: what the observer adds to a review of 100 v2
// Books converted to v1 (reading each object's header again).
func BenchmarkReview100Books(b *testing.B) {
	objs := make([]runtime.RawExtension, 100)
	for i := range objs {
		objs[i] = raw(&testing.T{}, v2Book(fmt.Sprint("b", i)))
	}
	body := reviewBody(&testing.T{}, v1Version, objs...)
	for _, c := range []struct {
		name string
		obs  Observer
	}{{"observer=nil", nil}, {"observer=discard", discard{}}} {
		b.Run(c.name, func(b *testing.B) {
			h, _ := newTestHandler()
			h.SetObserver(c.obs)
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}
