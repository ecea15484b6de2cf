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
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// DelayWatch returns a copy of cfg whose watches on the named resource (the
// last path element, e.g. "configmaps") deliver every byte d later than the
// API server sent it. Informers see their events late but in order, as with
// a lagging watch cache or a slow network: tests use it to make one
// informer's events overtake another's deterministically.
func DelayWatch(cfg *rest.Config, resource string, d time.Duration) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err != nil || req.URL.Query().Get("watch") != "true" || !strings.HasSuffix(req.URL.Path, "/"+resource) {
				return resp, err
			}
			resp.Body = newDelayedBody(resp.Body, d)
			return resp, nil
		})
	})
	return cfg
}

type chunk struct {
	data []byte
	at   time.Time
	err  error
}

// delayedBody hands out what it read from body, each chunk no sooner than d
// after it arrived.
type delayedBody struct {
	body    io.ReadCloser
	d       time.Duration
	chunks  chan chunk
	pending []byte
	err     error
}

func newDelayedBody(body io.ReadCloser, d time.Duration) *delayedBody {
	b := &delayedBody{body: body, d: d, chunks: make(chan chunk, 1024)}
	go func() {
		defer close(b.chunks)
		for {
			buf := make([]byte, 32*1024)
			n, err := body.Read(buf)
			b.chunks <- chunk{data: buf[:n], at: time.Now(), err: err}
			if err != nil {
				return
			}
		}
	}()
	return b
}

func (b *delayedBody) Read(p []byte) (int, error) {
	for len(b.pending) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		c, ok := <-b.chunks
		if !ok {
			return 0, io.EOF
		}
		time.Sleep(time.Until(c.at.Add(b.d)))
		b.pending, b.err = c.data, c.err
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

func (b *delayedBody) Close() error { return b.body.Close() }
