package framework

import (
	"net/http"
	"sync"

	"k8s.io/client-go/rest"
)

// RequestCounter counts the API requests made through a rest.Config, by
// HTTP method, so tests can assert "no writes" from the outside.
type RequestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// Wrap returns a copy of cfg whose requests are counted.
func (c *RequestCounter) Wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			c.mu.Lock()
			if c.counts == nil {
				c.counts = map[string]int{}
			}
			c.counts[req.Method]++
			c.mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// Writes is the number of POST, PUT, PATCH and DELETE requests so far.
func (c *RequestCounter) Writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[http.MethodPost] + c.counts[http.MethodPut] + c.counts[http.MethodPatch] + c.counts[http.MethodDelete]
}

// Gets is the number of GET requests (reads, lists and watches) so far.
func (c *RequestCounter) Gets() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[http.MethodGet]
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
