//go:build chaos && linux

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

package chaos_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/test/integration/framework"
)

// Expired watches: kube-apiserver without its watch cache, so every watch
// is etcd's, compacting etcd every second; the controller reaches it
// through a proxy that cuts all its connections now and then while the
// Books keep being edited.
const (
	expiredBooks    = 200
	expiredEditors  = 4
	expiredEditGap  = 50 * time.Millisecond // between one editor's edits
	expiredNewEvery = time.Second           // a new Book
	// The cuts: each is longer than a few compaction intervals, so the
	// revision the informers last saw is compacted before they can watch
	// again; the stream goes on 2s after the last.
	expiredCut       = 5 * time.Second
	expiredCuts      = 3
	expiredFirstCut  = 10 * time.Second
	expiredCutPeriod = 18 * time.Second
	expiredTail      = 2 * time.Second
	// expiredSettle bounds the convergence after the last edit: below
	// the controller's 30s recheck of a Book waiting for its own
	// ConfigMap write to reach the cache, so a Book that waited for an
	// event that cannot come (a resourceVersion compacted away) would
	// show.
	expiredSettle = 25 * time.Second
	// expiredMessage is what the API server says in the ERROR event of a
	// watch from a compacted revision (410 Expired), in JSON and protobuf
	// alike.
	expiredMessage = "provided watch is too old"
)

// TestExpiredWatches runs a control plane of its own with
// --watch-cache=false and --etcd-compaction-interval=1s, and the controller
// behind a proxy. Under a stream of Book edits (four editors) and new Books
// (one a second), the proxy cuts every connection of the controller three
// times, holding its new ones for 5s: the informers' watches end, client-go
// watches again from the last resourceVersion seen, and by the time that
// request arrives etcd has compacted it, so each watch gets 410 Gone
// (Expired) and the informer relists. The test counts the 410s and the relists per resource
// from the controller's own requests, checks every Book converges to the
// last spec written within 25s of the last edit (no Book stuck waiting for
// a resourceVersion that cannot come), and that the audit log shows exactly
// one ConfigMap create that succeeded per Book.
func TestExpiredWatches(t *testing.T) {
	ctx := context.Background()
	e := ownControlPlane(t, []string{"--watch-cache=false", "--etcd-compaction-interval=1s"}, nil)
	ns := e.Namespace(t)
	want := createBooksIn(t, e, ns, "book", expiredBooks)

	u, err := url.Parse(e.Cluster.RESTConfig().Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startCutProxy(t, u.Host)
	tally := &watchTally{}
	cfg := e.ControllerServiceAccountConfig(t)
	cfg.Host = "https://" + proxy.addr
	e.StartController(t, framework.ControllerOptions{Namespace: ns, RESTConfig: tally.wrap(cfg), ConflictRecheck: 5 * time.Second})
	waitConvergedIn(t, e, ns, expectation{want: want})
	initial := tally.snapshot()

	// The stream: editor i edits the Books whose index is i modulo
	// expiredEditors, in turn, so that each Book's last spec is its last
	// editor's; a creator adds a Book a second.
	var mu sync.Mutex
	edits, added := 0, 0
	var lastWrite time.Time
	wrote := func(name string, s spec) {
		mu.Lock()
		defer mu.Unlock()
		want[name] = s
		lastWrite = time.Now()
	}
	books := e.Books.WebappV2().Books(ns)
	// The stream ends between writes, never during one, so that every
	// write's outcome is known.
	endOfStream := make(chan struct{})
	ended := func() bool {
		select {
		case <-endOfStream:
			return true
		default:
			return false
		}
	}
	var stream sync.WaitGroup
	var streamErr atomic.Pointer[error]
	for i := range expiredEditors {
		stream.Go(func() {
			for round := 1; ; round++ {
				for j := i; j < expiredBooks; j += expiredEditors {
					select {
					case <-endOfStream:
						return
					case <-time.After(expiredEditGap):
					}
					name := bookName("book", j)
					s := spec{title: fmt.Sprintf("Title of %s, edit %d", name, round), price: int32(1000*round + j)}
					err := framework.RetryTransient(ctx, func() error {
						b, err := books.Get(ctx, name, metav1.GetOptions{})
						if err != nil {
							return err
						}
						b.Spec.Title, b.Spec.Price = s.title, webappv2.WholePrice(s.price)
						_, err = books.Update(ctx, b, metav1.UpdateOptions{})
						return err
					})
					if err != nil {
						err = fmt.Errorf("editing Book %s: %w", name, err)
						streamErr.CompareAndSwap(nil, &err)
						return
					}
					wrote(name, s)
					mu.Lock()
					edits++
					mu.Unlock()
				}
			}
		})
	}
	stream.Go(func() {
		for i := 0; !ended(); i++ {
			select {
			case <-endOfStream:
				return
			case <-time.After(expiredNewEvery):
			}
			name := bookName("late", i)
			s := spec{title: "Title of " + name, price: int32(i)}
			retried := false
			err := framework.RetryTransient(ctx, func() error {
				_, err := books.Create(ctx, framework.NewBook(ns, name, s.title, s.price), metav1.CreateOptions{})
				if retried && apierrors.IsAlreadyExists(err) {
					return nil // an earlier attempt went through, its answer was lost
				}
				retried = true
				return err
			})
			if err != nil {
				err = fmt.Errorf("creating Book %s: %w", name, err)
				streamErr.CompareAndSwap(nil, &err)
				return
			}
			wrote(name, s)
			mu.Lock()
			added++
			mu.Unlock()
		}
	})

	streamStart := time.Now()
	var atCut []watchCounts // the counts as each cut begins
	for c := range expiredCuts {
		time.Sleep(time.Until(streamStart.Add(expiredFirstCut + time.Duration(c)*expiredCutPeriod)))
		atCut = append(atCut, tally.snapshot())
		proxy.cut()
		faults.Add(1)
		time.Sleep(expiredCut)
		proxy.restore()
		t.Logf("cut %d: the controller's connections were cut for %v", c+1, expiredCut)
	}
	time.Sleep(expiredTail)
	close(endOfStream)
	stream.Wait()
	if p := streamErr.Load(); p != nil {
		t.Fatal(*p)
	}
	mu.Lock()
	lastEdit, totalEdits, totalAdded := lastWrite, edits, added
	exp := expectation{want: maps.Clone(want)}
	mu.Unlock()

	waitConvergedIn(t, e, ns, exp)
	settled := time.Since(lastEdit)
	final := tally.snapshot()

	// One successful ConfigMap create per Book, whatever was cut.
	writes := framework.ControllerWrites(e.AuditLog(t), ns)
	created := map[string]int{}
	var alreadyExists, createAttempts int
	for _, w := range writesOf(writes, "configmaps") {
		if w.Verb != "create" {
			continue
		}
		createAttempts++
		switch w.Code {
		case http.StatusCreated:
			created[w.Object]++
		case http.StatusConflict:
			alreadyExists++
		}
	}
	for name := range exp.want {
		if n := created[ns+"/"+name]; n != 1 {
			t.Errorf("ConfigMap %s/%s was created %d times, want once", ns, name, n)
		}
	}
	for _, n := range created {
		if n > 1 {
			duplicated.Add(int64(n - 1))
		}
	}

	// Each cut must have cost each informer a 410 and a relist.
	relists, expired := map[string]int{}, map[string]int{}
	for _, r := range []string{"books", "configmaps"} {
		relists[r] = final.relists(r) - initial.relists(r)
		expired[r] = final.expired[r] - initial.expired[r]
		for c := range atCut {
			next := final
			if c+1 < len(atCut) {
				next = atCut[c+1]
			}
			got410, gotRelists := next.expired[r]-atCut[c].expired[r], next.relists(r)-atCut[c].relists(r)
			t.Logf("%s: from cut %d to the next (or the end), %d 410s and %d relists", r, c+1, got410, gotRelists)
			if got410 < 1 || gotRelists < 1 {
				t.Errorf("the %s informer got %d 410s (Expired) and relisted %d times after cut %d: want one of each at least (watches from a resourceVersion: %d in all)",
					r, got410, gotRelists, c+1, final.watches[r])
			}
		}
	}
	if settled > expiredSettle {
		t.Errorf("the Books converged %v after the last edit: more than %v, as if some waited for the controller's recheck", settled.Round(100*time.Millisecond), expiredSettle)
	}
	serverWatchLists := apiServerWatchLists(t, e)
	figure(t, "%d Books edited %d times and %d added over %v, the controller's connections cut %d×%v, etcd compacted every 1s without watch cache: 410s books %d, configmaps %d; relists books %d, configmaps %d (watch-list streams on the server: %v); ConfigMap creates %d (%d succeeded, %d AlreadyExists) for %d Books; all converged %v after the last edit",
		expiredBooks, totalEdits, totalAdded, lastEdit.Sub(streamStart).Round(100*time.Millisecond), expiredCuts, expiredCut,
		expired["books"], expired["configmaps"], relists["books"], relists["configmaps"], serverWatchLists, createAttempts, len(created), alreadyExists, len(exp.want),
		settled.Round(100*time.Millisecond))
}

// apiServerWatchLists is the number of watch-list streams (watches with
// sendInitialEvents, an informer's list) that the API server completed per
// resource for namespaced requests, its own count of the relists.
func apiServerWatchLists(t *testing.T, e *framework.Env) map[string]float64 {
	t.Helper()
	families := apiServerMetrics(t, e)
	out := map[string]float64{}
	for _, r := range []string{"books", "configmaps"} {
		out[r] = optionalMetric(families, "apiserver_watch_list_duration_seconds", "resource", r, "scope", "namespace")
	}
	return out
}

// watchCounts are the controller's lists and watches of one moment, by
// resource ("books", "configmaps").
type watchCounts struct {
	lists      map[string]int // plain LISTs
	watchLists map[string]int // watches with sendInitialEvents: client-go's streaming list
	watches    map[string]int // watches from a resourceVersion
	expired    map[string]int // watches that ended in 410 Expired
}

// relists is how many times the informer of resource r has listed (either
// way), its first list included.
func (c watchCounts) relists(r string) int { return c.lists[r] + c.watchLists[r] }

// watchTally counts the lists and watches a rest.Config's clients make of
// Books and ConfigMaps, and the watches that end in 410 Expired, read from
// the watch streams themselves.
type watchTally struct {
	mu sync.Mutex
	c  watchCounts
}

func (w *watchTally) add(m *map[string]int, resource string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[resource]++
}

func (w *watchTally) snapshot() watchCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	return watchCounts{lists: maps.Clone(w.c.lists), watchLists: maps.Clone(w.c.watchLists),
		watches: maps.Clone(w.c.watches), expired: maps.Clone(w.c.expired)}
}

// wrap returns a copy of cfg whose lists and watches are counted.
func (w *watchTally) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resource := path.Base(req.URL.Path)
			if req.Method != http.MethodGet || (resource != "books" && resource != "configmaps") {
				return rt.RoundTrip(req)
			}
			q := req.URL.Query()
			watching := q.Get("watch") == "true" || q.Get("watch") == "1"
			switch {
			case !watching:
				w.add(&w.c.lists, resource)
			case q.Get("sendInitialEvents") == "true":
				w.add(&w.c.watchLists, resource)
			default:
				w.add(&w.c.watches, resource)
			}
			resp, err := rt.RoundTrip(req)
			if err != nil || !watching {
				return resp, err
			}
			if resp.StatusCode == http.StatusGone {
				w.add(&w.c.expired, resource)
			}
			resp.Body = &scanningBody{ReadCloser: resp.Body, pattern: []byte(expiredMessage),
				found: func() { w.add(&w.c.expired, resource) }}
			return resp, nil
		})
	})
	return cfg
}

// scanningBody calls found for every occurrence of pattern in what is read
// through it, also across reads.
type scanningBody struct {
	io.ReadCloser
	pattern []byte
	found   func()
	tail    []byte // the last len(pattern)-1 bytes read
}

func (b *scanningBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		buf := append(b.tail, p[:n]...)
		// Occurrences ending within the new bytes; the tail alone is
		// shorter than the pattern.
		for i := 0; ; {
			j := bytes.Index(buf[i:], b.pattern)
			if j < 0 {
				break
			}
			b.found()
			i += j + 1
		}
		keep := min(len(buf), len(b.pattern)-1)
		b.tail = append(b.tail[:0:0], buf[len(buf)-keep:]...)
	}
	return n, err
}

// cutProxy is a TCP proxy on 127.0.0.1 that can cut: reset every
// connection it carries and hold the new ones, neither refused nor
// answered, until restore (as a load balancer in front of a restarting API
// server may). A client's streams fail at once, and its new connections
// complete their TLS handshake after the restore, within client-go's 10s
// handshake timeout if the cut is shorter: so an informer's reflector,
// whose watch ended, watches again from the last resourceVersion it saw,
// without the backoff it would take after a refused connection.
type cutProxy struct {
	target, addr string
	ln           net.Listener

	mu     sync.Mutex
	open   chan struct{} // closed while connections are carried
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{target: target, addr: ln.Addr().String(), ln: ln, open: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.open)
	p.wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.carry(client) })
		}
	})
	t.Cleanup(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.cut()
		p.restore() // releases the held connections, to be reset
		ln.Close()
		p.wg.Wait()
	})
	return p
}

// carry waits while the proxy is cut, then connects client to the target
// until either side ends or a cut resets both.
func (p *cutProxy) carry(client net.Conn) {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	<-open
	server, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		reset(client)
		return
	}
	p.mu.Lock()
	if p.closed || p.open != open { // closed or cut again meanwhile
		p.mu.Unlock()
		reset(client)
		reset(server)
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(server, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, server); done <- struct{}{} }()
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
	reset(client)
	reset(server)
	<-done
}

// cut resets every connection carried and holds new ones.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default: // already cut
	}
	for c := range p.conns {
		reset(c)
	}
	clear(p.conns)
}

// restore carries the held connections and the new ones again.
func (p *cutProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// reset closes c with a TCP reset rather than a FIN.
func reset(c net.Conn) {
	if tcp, ok := c.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = c.Close()
}
