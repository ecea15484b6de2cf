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
