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

package framework

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Request is one API request seen by a RequestCounter.
type Request struct {
	Method string
	Path   string
	Query  string // the raw query: watch=true, sendInitialEvents=true, ...
	At     time.Time
}

// IsWrite reports whether the request changes state on the server.
func (r Request) IsWrite() bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// IsLease reports whether the request is about a coordination.k8s.io Lease
// (leader election), which every replica reads and the leader renews.
func (r Request) IsLease() bool {
	return strings.Contains(r.Path, "/apis/coordination.k8s.io/")
}

// RequestCounter records the API requests made through a rest.Config, so
// tests can assert "no writes" or "never both at once" from the outside.
type RequestCounter struct {
	mu       sync.Mutex
	requests []Request
}

// Wrap returns a copy of cfg whose requests are recorded.
func (c *RequestCounter) Wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			c.mu.Lock()
			c.requests = append(c.requests, Request{Method: req.Method, Path: req.URL.Path, Query: req.URL.RawQuery, At: time.Now()})
			c.mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// Requests returns a copy of what has been recorded so far.
func (c *RequestCounter) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Request(nil), c.requests...)
}

// Writes is the number of POST, PUT, PATCH and DELETE requests so far.
func (c *RequestCounter) Writes() int {
	n := 0
	for _, r := range c.Requests() {
		if r.IsWrite() {
			n++
		}
	}
	return n
}

// ObjectWrites returns the writes other than leader election's.
func (c *RequestCounter) ObjectWrites() []Request {
	var out []Request
	for _, r := range c.Requests() {
		if r.IsWrite() && !r.IsLease() {
			out = append(out, r)
		}
	}
	return out
}

// Gets is the number of GET requests (reads, lists and watches) so far.
func (c *RequestCounter) Gets() int {
	n := 0
	for _, r := range c.Requests() {
		if r.Method == http.MethodGet {
			n++
		}
	}
	return n
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
