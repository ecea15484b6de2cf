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
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

//go:embed static
var static embed.FS

// streamInterval is how often the page's event stream sends the figures.
const streamInterval = 500 * time.Millisecond

// Server serves the page and its API:
//
//	GET /                                   the page (static/, embedded)
//	GET /api/snapshot                       every figure the page draws
//	GET /api/journeys/{namespace}/{name}    a Book's recent steps
//	GET /api/events[?book=namespace/name]   the snapshot (and that Book's
//	                                        journey) as Server-Sent Events
type Server struct {
	rec    *Recorder
	gather prometheus.Gatherer
	mux    *http.ServeMux
	// done ends the event streams; closed once by Close, read by every
	// stream's goroutine.
	done      chan struct{}
	closeOnce sync.Once
}

// NewServer serves rec's figures, with the queue's and the Leases' read
// from gather.
func NewServer(rec *Recorder, gather prometheus.Gatherer) *Server {
	s := &Server{rec: rec, gather: gather, mux: http.NewServeMux(), done: make(chan struct{})}
	page, _ := fs.Sub(static, "static") // cannot fail: the directory is embedded
	s.mux.Handle("GET /", http.FileServerFS(page))
	s.mux.HandleFunc("GET /api/snapshot", s.snapshot)
	s.mux.HandleFunc("GET /api/journeys/{namespace}/{name}", s.journey)
	s.mux.HandleFunc("GET /api/events", s.events)
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// Everything the page needs comes from this server.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:")
	s.mux.ServeHTTP(w, req)
}

// Close ends the event streams, so that a graceful shutdown of the HTTP
// server need not wait for them. Safe to call more than once.
func (s *Server) Close() { s.closeOnce.Do(func() { close(s.done) }) }

func (s *Server) snapshot(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.rec.Snapshot(s.gather))
}

func (s *Server) journey(w http.ResponseWriter, req *http.Request) {
	key := cache.ObjectName{Namespace: req.PathValue("namespace"), Name: req.PathValue("name")}
	j, ok := s.rec.Journey(key)
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf(
			"no journey kept for Book %s: it has had no event since the controller started, or was dropped (the last %d Books are kept)",
			key, s.rec.opts.MaxBooks)})
		return
	}
	writeJSON(w, http.StatusOK, j)
}

// update is one Server-Sent Event.
type update struct {
	Snapshot Snapshot `json:"snapshot"`
	Journey  *Journey `json:"journey,omitempty"`
}

func (s *Server) events(w http.ResponseWriter, req *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming not supported by this connection", http.StatusInternalServerError)
		return
	}
	book, watching := parseBook(req.URL.Query().Get("book"))
	w.Header().Set("Content-Type", "text/event-stream")
	ticker := time.NewTicker(streamInterval)
	defer ticker.Stop()
	for {
		u := update{Snapshot: s.rec.Snapshot(s.gather)}
		if j, ok := s.rec.Journey(book); watching && ok {
			u.Journey = &j
		}
		data, err := json.Marshal(u)
		if err != nil {
			klog.FromContext(req.Context()).Error(err, "Encoding a UI update")
			return
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
			return // the page went away
		}
		flusher.Flush()
		select {
		case <-ticker.C:
		case <-req.Context().Done():
			return
		case <-s.done:
			return
		}
	}
}

// parseBook reads "namespace/name".
func parseBook(s string) (cache.ObjectName, bool) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return cache.ObjectName{}, false
	}
	return cache.ObjectName{Namespace: ns, Name: name}, true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // a write error means the client went away
}
