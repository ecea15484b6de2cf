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
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestServerAnswersThePageAndTheAPI(t *testing.T) {
	r := newTestRecorder(Options{Workers: 2, SourceURL: "https://example.test/fork/blob/main/"})
	travel(r, demo)
	reg := prometheus.NewRegistry()
	depth := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth"}, []string{"name"})
	depth.WithLabelValues("book").Set(7)
	leader := prometheus.NewGauge(prometheus.GaugeOpts{Name: "leader_election_master_status", ConstLabels: prometheus.Labels{"name": "book-controller"}})
	leader.Set(1)
	reg.MustRegister(depth, leader)
	srv := NewServer(r, reg)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()

	if code, body := get(t, ts.URL+"/"); code != 200 || !strings.Contains(body, "cache.Reflector") {
		t.Errorf("GET /: %d, page names no cache.Reflector", code)
	} else if !strings.Contains(body, `data-path="pkg/controller/handlers.go"`) {
		t.Errorf("GET /: the handlers' box has no data-path for --ui-source-url to rewrite")
	}
	var s Snapshot
	code, body := get(t, ts.URL+"/api/snapshot")
	if err := json.Unmarshal([]byte(body), &s); code != 200 || err != nil {
		t.Fatalf("GET /api/snapshot: %d %v", code, err)
	}
	if s.SourceURL != "https://example.test/fork/blob/main/" {
		t.Errorf("snapshot sourceURL %q, want the Recorder's", s.SourceURL)
	}
	if s.Queue.Depth != 7 || !s.Leadership.Leading || s.Leadership.Leases["book-controller"] != true {
		t.Errorf("snapshot: depth %v, leadership %+v; want 7 and the Lease held", s.Queue.Depth, s.Leadership)
	}
	if len(s.Books) != 1 || s.Books[0].Name != "demo" {
		t.Errorf("snapshot Books: %+v", s.Books)
	}
	if code, body := get(t, ts.URL+"/api/journeys/default/demo"); code != 200 || !strings.Contains(body, `"update-status"`) {
		t.Errorf("GET journey: %d %s", code, body)
	}
	if code, body := get(t, ts.URL+"/api/journeys/default/nobody"); code != 404 || !strings.Contains(body, "no journey kept for Book default/nobody") {
		t.Errorf("GET unknown journey: %d %s", code, body)
	}
}

func TestEventStreamSendsTheJourneyAskedFor(t *testing.T) {
	r := newTestRecorder(Options{})
	travel(r, demo)
	srv := NewServer(r, nil)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/api/events?book=default/demo")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var u update
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &u); err != nil {
		t.Fatalf("first event %q: %v", line, err)
	}
	if u.Journey == nil || len(u.Journey.Path) != 7 {
		t.Errorf("first event carries no journey of 7 steps: %+v", u.Journey)
	}
	srv.Close() // the stream ends, so a graceful shutdown need not wait
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Errorf("stream did not end cleanly after Close: %v", err)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
