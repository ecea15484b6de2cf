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

package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	"ydzs.io/book-controller/test/integration/framework"
)

func numCPU() int { return runtime.NumCPU() }

var nsSeq int

// namespace creates a fresh namespace for a phase; its name carries the
// round and a sequence number, so that logs and JSON can be matched.
func (e *env) namespace(ctx context.Context, phase string) (string, error) {
	nsSeq++
	ns := fmt.Sprintf("bench-r%d-%s-%d", e.round, phase, nsSeq)
	if len(ns) > 63 {
		ns = ns[:63]
	}
	_, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	return ns, err
}

// deleteNamespace deletes the phase's namespace, with everything in it, and
// waits until the API server no longer has it, so that the next phase meets
// a server that holds no earlier phase's objects and is not busy deleting
// them.
func (e *env) deleteNamespace(ctx context.Context, p *Phase) error {
	if p == nil || p.Namespace == "" {
		return nil
	}
	t := time.Now()
	err := e.kube.CoreV1().Namespaces().Delete(ctx, p.Namespace, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting namespace %s: %w", p.Namespace, err)
	}
	timeout := 5*time.Minute + time.Duration(e.o.n/50)*time.Second
	err = poll.Until(ctx, "namespace "+p.Namespace+" to be deleted", 20*time.Millisecond, timeout, func(ctx context.Context) error {
		ns, err := e.kube.CoreV1().Namespaces().Get(ctx, p.Namespace, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("phase %s", ns.Status.Phase)
		}
		return poll.Done(apierrors.IsNotFound(err), "%v", err)
	})
	p.NamespaceDeleteSeconds = round(time.Since(t).Seconds(), 1)
	if err != nil {
		return err
	}
	return nil
}

// readyWatch records, client side, when each Book is first seen Ready=True,
// from a watch on the namespace's Books.
type readyWatch struct {
	mu      sync.Mutex
	readyAt map[string]time.Time
	n       int
	all     chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

// isReady: Ready for the Book's current generation (framework.IsReady), as
// every test counts it.
func isReady(b *webappv2.Book) bool { return framework.IsReady(b) }

// readySource is the Book API a readyWatch lists and watches: v2, or v1
// for the v1-only release (the v1-backlog phase).
type readySource struct {
	// list calls observe for each Book listed and returns the list's
	// resourceVersion.
	list  func(ctx context.Context, observe func(name string, ready bool)) (string, error)
	watch func(ctx context.Context, rv string) (watch.Interface, error)
	// object is an event's Book: its name, resourceVersion and whether it
	// is Ready; ok is false for an object that is no Book.
	object func(obj kruntime.Object) (name, rv string, ready, ok bool)
}

// v2Source lists and watches the Books of ns through v2.
func v2Source(books versioned.Interface, ns string) readySource {
	client := books.WebappV2().Books(ns)
	return typedSource(client.List, client.Watch, func(l *webappv2.BookList) ([]webappv2.Book, string) {
		return l.Items, l.ResourceVersion
	}, isReady)
}

// typedSource is the readySource of one version's typed client: list and
// watch are its methods, items a list's Books and resourceVersion, ready
// the check of one Book.
func typedSource[B any, PB interface {
	*B
	kruntime.Object
	GetName() string
	GetResourceVersion() string
}, L any](
	list func(context.Context, metav1.ListOptions) (L, error),
	watchBooks func(context.Context, metav1.ListOptions) (watch.Interface, error),
	items func(L) ([]B, string), ready func(PB) bool,
) readySource {
	return readySource{
		list: func(ctx context.Context, observe func(string, bool)) (string, error) {
			l, err := list(ctx, metav1.ListOptions{})
			if err != nil {
				return "", err
			}
			books, rv := items(l)
			for i := range books {
				b := PB(&books[i])
				observe(b.GetName(), ready(b))
			}
			return rv, nil
		},
		watch: func(ctx context.Context, rv string) (watch.Interface, error) {
			return watchBooks(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		},
		object: func(obj kruntime.Object) (string, string, bool, bool) {
			b, ok := obj.(PB)
			if !ok {
				return "", "", false, false
			}
			return b.GetName(), b.GetResourceVersion(), ready(b), true
		},
	}
}

func (e *env) watchReady(ctx context.Context, ns string, n int) (*readyWatch, error) {
	return watchReadyFrom(ctx, v2Source(e.watch, ns), n)
}

// watchReadyFrom starts a readyWatch on src for n Books.
func watchReadyFrom(ctx context.Context, src readySource, n int) (*readyWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &readyWatch{readyAt: map[string]time.Time{}, n: n, all: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	list := func() (string, error) { return src.list(ctx, w.observe) }
	rv, err := list()
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			wi, err := src.watch(ctx, rv)
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				if rv, err = list(); err != nil {
					time.Sleep(time.Second)
				}
				continue
			}
			expired := false
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					expired = true
					break
				}
				if name, objRV, ready, ok := src.object(ev.Object); ok {
					rv = objRV
					if ev.Type != watch.Bookmark {
						w.observe(name, ready)
					}
				}
			}
			wi.Stop()
			if expired && ctx.Err() == nil {
				if l, err := list(); err == nil {
					rv = l
				}
			}
		}
	}()
	return w, nil
}

// observe records the first time the Book called name is seen Ready.
func (w *readyWatch) observe(name string, ready bool) {
	if !ready {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.readyAt[name]; seen {
		return
	}
	w.readyAt[name] = now
	if len(w.readyAt) == w.n {
		close(w.all)
	}
}

func (w *readyWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.readyAt)
}

func (w *readyWatch) stop() {
	w.cancel()
	<-w.done
}

// wait blocks until all n Books are Ready or timeout passes.
func (w *readyWatch) wait(ctx context.Context, timeout time.Duration) error {
	select {
	case <-w.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		return &notReadyError{ready: w.count(), n: w.n, after: timeout}
	}
}

// notReadyError says that not every Book became Ready in time.
type notReadyError struct {
	ready, n int
	after    time.Duration
}

func (e *notReadyError) Error() string {
	return fmt.Sprintf("only %d of %d Books Ready after %s", e.ready, e.n, e.after)
}

func bookName(i int) string { return fmt.Sprintf("book-%05d", i) }

func newBook(ns string, i int) *webappv2.Book {
	return &webappv2.Book{
		ObjectMeta: metav1.ObjectMeta{Name: bookName(i), Namespace: ns},
		Spec:       webappv2.BookSpec{Title: "Book number " + strconv.Itoa(i), Price: webappv2.WholePrice(int32(i % 1000))},
	}
}

// creation is what createBooks did.
type creation struct {
	// createdAt is when each Book's Create returned, by name.
	createdAt map[string]time.Time
	books     []*webappv2.Book
	// issuedPerSecond is the rate at which Creates were sent, from the first
	// to the last: the pace kept, unless every creator was still waiting
	// for the API server.
	issuedPerSecond float64
}

// createBooks creates n Books at concurrency c (optionally paced to r per
// second).
func (e *env) createBooks(ctx context.Context, ns string, n, c int, r float64) (*creation, error) {
	created := make([]*webappv2.Book, n)
	at := make([]time.Time, n)
	issued, err := work(ctx, n, c, r, func(i int) error {
		var b *webappv2.Book
		err := withRetries(func() (err error) {
			b, err = e.books.WebappV2().Books(ns).Create(ctx, newBook(ns, i), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return err
		}
		at[i], created[i] = time.Now(), b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("creating Books: %w", err)
	}
	out := &creation{createdAt: make(map[string]time.Time, n), books: created, issuedPerSecond: issued}
	for i, t := range at {
		out.createdAt[bookName(i)] = t
	}
	return out, nil
}

// withRetries calls create up to five times, 50 ms apart, until it
// succeeds: a Create the shared API server fails now and then must not end
// a phase.
func withRetries(create func() error) error {
	var err error
	for range 5 {
		if err = create(); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// work runs do(0) … do(n-1) on c goroutines, handing the indexes out at r
// per second when r > 0, as fast as they are taken otherwise. It returns the
// rate at which they were taken, first to last (the pace kept, unless every
// goroutine was still busy), and the first error; an error does not stop
// the others.
func work(ctx context.Context, n, c int, r float64, do func(i int) error) (float64, error) {
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range c {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	issued := feed(ctx, next, n, r)
	wg.Wait()
	return issued, first
}

// feed sends 0 … n-1 to next, paced to r per second when r > 0, closes it,
// and returns the rate at which they were taken, first to last: the pace
// kept, unless every taker was still busy.
func feed(ctx context.Context, next chan<- int, n int, r float64) float64 {
	defer close(next)
	var lim *rate.Limiter
	if r > 0 {
		lim = rate.NewLimiter(rate.Limit(r), 1)
	}
	var first, last time.Time
	for i := range n {
		if lim != nil {
			if err := lim.Wait(ctx); err != nil {
				break
			}
		}
		next <- i
		if last = time.Now(); i == 0 {
			first = last
		}
	}
	if n > 1 && last.After(first) {
		return float64(n-1) / last.Sub(first).Seconds()
	}
	return 0
}

// prepare waits for a quiet machine and makes the phase's namespace.
func (e *env) prepare(ctx context.Context, p *Phase) error {
	busy, waited := waitQuiet(ctx, e.o.maxBusy)
	p.OtherCoresBusyAtStart, p.WaitedForQuietSeconds, p.LoadAvgStart = round(busy, 2), round(waited.Seconds(), 1), loadavg()
	ns, err := e.namespace(ctx, p.Name)
	p.Namespace = ns
	return err
}

// arm is what a phase does right before its t = 0: it starts the watch
// that sees the namespace's Books become Ready, waits for a quiet machine,
// and reads the control plane's CPU. The caller stops the watch.
func (e *env) arm(ctx context.Context, p *Phase, src readySource) (*readyWatch, map[string]float64, error) {
	w, err := watchReadyFrom(ctx, src, e.o.n)
	if err != nil {
		return nil, nil, err
	}
	busy, _ := waitQuiet(ctx, e.o.maxBusy)
	p.OtherCoresBusyAtStart = round(busy, 2)
	return w, e.cpCPU(), nil
}

// cpCPU is the control plane's CPU seconds so far (local cluster only).
func (e *env) cpCPU() map[string]float64 {
	out := map[string]float64{}
	if e.cluster == nil {
		return out
	}
	for name, pid := range e.cluster.Pids() {
		if s, err := readProc(pid); err == nil {
			out[name] = s.CPUSeconds
		}
	}
	if s, err := readProc(selfPid); err == nil {
		out["bench"] = s.CPUSeconds
	}
	return out
}

func (e *env) finishCPU(p *Phase, before map[string]float64) {
	p.OtherCPUSeconds = map[string]float64{}
	for k, v := range e.cpCPU() {
		p.OtherCPUSeconds[k] = round(v-before[k], 2)
	}
}

// collect fills in the controller's figures just before it is stopped.
func collect(p *Phase, pr *proc) {
	if s, err := readProc(pr.pid); err == nil {
		p.CPUSeconds = round(s.CPUSeconds, 2)
		p.PeakRSSBytes = s.HWMBytes
		p.EndRSSBytes = s.RSSBytes
		p.EndRSSFileBytes = s.RSSFileBytes
	}
	if m, err := scrape(pr.metricsAddr); err == nil {
		p.EndHeapInuseBytes = uint64(m.value("go_memstats_heap_inuse_bytes"))
		p.EndHeapAllocBytes = uint64(m.value("go_memstats_heap_alloc_bytes"))
		p.Requests = m.requests()
		p.Writes = writes(p.Requests)
		p.Retries = m.value("workqueue_retries_total")
	}
	pr.mu.Lock()
	p.PeakHeapInuseBytes = uint64(max(pr.peakHeap, float64(p.EndHeapInuseBytes)))
	pr.mu.Unlock()
	p.Args = pr.args
	p.Env = pr.env
	p.UIUpdates = pr.uiUpdates.Load()
}

func (e *env) countConfigMaps(ctx context.Context, ns string) int {
	l, err := e.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: controller.ManagedBySelector})
	if err != nil {
		return -1
	}
	return len(l.Items)
}

// livePhase runs a controller, then creates N Books while it runs: the
// end-to-end time and create→Ready latency. pace > 0 creates them at that
// many per second (from -paced-creators goroutines), else as fast as -c
// creators can.
func (e *env) livePhase(ctx context.Context, name string, s controllerSpec, pace float64) (*Phase, error) {
	p := e.newPhase(name, "live", s)
	p.CreateRate = round(pace, 1)
	creators := e.o.c
	timeout := e.o.timeout
	if pace > 0 {
		creators = e.o.pacedCreators
		timeout = max(timeout, time.Duration(float64(e.o.n)/pace*float64(time.Second))+60*time.Second)
	}
	p.C = creators
	if err := e.prepare(ctx, p); err != nil {
		return p, err
	}
	pr, err := e.startController(s, p.Namespace, e.logName(name))
	if err != nil {
		return p, err
	}
	defer func() {
		if !pr.exited() {
			pr.terminate()
		}
	}()
	err = poll.Until(ctx, s.Name+" to be ready", 20*time.Millisecond, 60*time.Second, func(ctx context.Context) error {
		if pr.exited() {
			return poll.Stop(errors.New("it exited"))
		}
		return framework.AnswersOK(pr.probeAddr, "/readyz")(ctx)
	})
	if err != nil {
		return p, fmt.Errorf("%w (log in %s)", err, e.work)
	}
	p.StartupSeconds = round(time.Since(pr.start).Seconds(), 3)
	if st, err := readProc(pr.pid); err == nil {
		p.IdleRSSBytes = st.RSSBytes
	}
	w, err := e.watchReady(ctx, p.Namespace, e.o.n)
	if err != nil {
		return p, err
	}
	defer w.stop()
	cpu0 := e.cpCPU()
	ctl0, _ := readProc(pr.pid)
	t0 := time.Now()
	cr, err := e.createBooks(ctx, p.Namespace, e.o.n, creators, pace)
	if err != nil {
		return p, err
	}
	createdAt := cr.createdAt
	p.CreateSeconds = round(time.Since(t0).Seconds(), 3)
	p.CreateRateAchieved = round(cr.issuedPerSecond, 1)
	if err := w.wait(ctx, timeout); err != nil {
		return p, fmt.Errorf("%s: %w", name, err)
	}
	e.finishCPU(p, cpu0)
	p.finishReady(t0, w.readyAt)
	p.latencies(createdAt, w.readyAt)
	if e.o.keep {
		if err := writeTimes(filepath.Join(e.work, e.logName(name)+"-times.csv"), t0, createdAt, w.readyAt); err != nil {
			return p, err
		}
	}
	p.ConfigMaps = e.countConfigMaps(ctx, p.Namespace)
	time.Sleep(time.Second) // let the last events and watch updates land
	collect(p, pr)
	p.CPUSecondsDuringRun = round(p.CPUSeconds-ctl0.CPUSeconds, 2)
	return p, nil
}

// newPhase fills in what a phase knows before it runs.
func (e *env) newPhase(name, mode string, s controllerSpec) *Phase {
	return &Phase{Name: name, Round: e.round, Mode: mode, Config: s.Config, Controller: s.Name, Workers: s.Workers,
		ClientLimit: s.ClientLimit, N: e.o.n, C: e.o.c}
}

// logName names a phase's files in the work directory.
func (e *env) logName(phase string) string { return fmt.Sprintf("r%d-%s", e.round, phase) }

// bookAPI is the API version a backlog phase creates and watches its Books
// through: v2, or v1 for the v1-only release (the v1-backlog phase).
type bookAPI struct {
	// precreate creates n Books in ns before the controller starts.
	precreate func(ctx context.Context, ns string, n int) error
	// source lists and watches the Books of ns.
	source func(ns string) readySource
}

// v2Books creates and watches Books through v2, the stored version.
func (e *env) v2Books() bookAPI {
	return bookAPI{
		precreate: func(ctx context.Context, ns string, n int) error {
			_, err := e.createBooks(ctx, ns, n, e.o.preCreateConcy, 0)
			return err
		},
		source: func(ns string) readySource { return v2Source(e.watch, ns) },
	}
}

// backlogPhase creates N Books with no controller, then starts one: the time
// from its start until every Book is Ready, the figure comparable with the
// API ceiling (same starting point, same writes per Book).
func (e *env) backlogPhase(ctx context.Context, name string, s controllerSpec) (*Phase, error) {
	return e.backlogPhaseOf(ctx, name, s, e.v2Books())
}

// backlogPhaseOf is backlogPhase with its Books created and watched
// through api.
func (e *env) backlogPhaseOf(ctx context.Context, name string, s controllerSpec, api bookAPI) (*Phase, error) {
	p := e.newPhase(name, "backlog", s)
	if err := e.prepare(ctx, p); err != nil {
		return p, err
	}
	t := time.Now()
	if err := api.precreate(ctx, p.Namespace, e.o.n); err != nil {
		return p, err
	}
	p.CreateSeconds = round(time.Since(t).Seconds(), 3)
	w, cpu0, err := e.arm(ctx, p, api.source(p.Namespace))
	if err != nil {
		return p, err
	}
	defer w.stop()
	pr, err := e.startController(s, p.Namespace, e.logName(name))
	if err != nil {
		return p, err
	}
	prof := e.startProfile(ctx, name, pr)
	defer func() {
		if !pr.exited() {
			pr.terminate()
		}
	}()
	if err := w.wait(ctx, e.o.timeout); err != nil {
		return p, fmt.Errorf("%s: %w", name, err)
	}
	e.finishCPU(p, cpu0)
	if err := prof.wait(); err != nil {
		return p, err
	}
	p.finishReady(pr.start, w.readyAt)
	p.ConfigMaps = e.countConfigMaps(ctx, p.Namespace)
	time.Sleep(time.Second)
	collect(p, pr)
	p.CPUSecondsDuringRun = p.CPUSeconds
	return p, nil
}

// ceilingPhase: N pre-created Books, then exactly the writes each needs —
// create its ConfigMap, write its status — at concurrency C, with no cache,
// no queue, no events. Ready is observed the same way as for controllers.
func (e *env) ceilingPhase(ctx context.Context, name string, c int, withEvents bool) (*Phase, error) {
	p := &Phase{Name: name, Round: e.round, Mode: "ceiling", Config: "ceiling", Controller: "load generator (in bench)",
		Workers: c, ClientLimit: "none", N: e.o.n, C: c}
	if withEvents {
		p.Controller = "load generator + 1 Event per Book"
	}
	if err := e.prepare(ctx, p); err != nil {
		return p, err
	}
	t := time.Now()
	cr, err := e.createBooks(ctx, p.Namespace, e.o.n, e.o.preCreateConcy, 0)
	if err != nil {
		return p, err
	}
	books := cr.books
	p.CreateSeconds = round(time.Since(t).Seconds(), 3)
	w, cpu0, err := e.arm(ctx, p, v2Source(e.watch, p.Namespace))
	if err != nil {
		return p, err
	}
	defer w.stop()
	t0 := time.Now()
	if _, err := work(ctx, len(books), c, 0, func(i int) error {
		err := e.converge(ctx, books[i])
		if err == nil && withEvents {
			err = e.event(ctx, books[i])
		}
		return err
	}); err != nil {
		return p, fmt.Errorf("ceiling: %w", err)
	}
	if err := w.wait(ctx, e.o.timeout); err != nil {
		return p, fmt.Errorf("ceiling: %w", err)
	}
	e.finishCPU(p, cpu0)
	p.finishReady(t0, w.readyAt)
	p.ConfigMaps = e.countConfigMaps(ctx, p.Namespace)
	p.Requests = map[string]float64{"POST": float64(len(books)), "PUT": float64(len(books))}
	if withEvents {
		p.Requests["POST"] += float64(len(books))
	}
	p.Writes = writes(p.Requests)
	return p, nil
}

// liveCeilingPhase is the load generator for the live workload: each of C
// writers creates a Book and at once makes the two writes a controller
// makes for it, so every Book costs the API server the three writes it
// costs in a live phase or a capacity step. No Book exists beforehand; the
// rate is N over the time from the first Create until every Book is Ready.
// A backlog ceiling makes two writes per Book, so a paced live run cannot
// reach more than about 2/3 of it on a server that writes are the limit of.
//
// pace > 0 hands the Books to the writers at that many per second, as a
// capacity step does: the load generator's own capacity at the latency
// target, the server's best with no controller in the loop.
func (e *env) liveCeilingPhase(ctx context.Context, name string, c int, pace float64) (*Phase, error) {
	p := &Phase{Name: name, Round: e.round, Mode: "ceiling-live", Config: "ceiling", Controller: "load generator, creating each Book too (in bench)",
		Workers: c, ClientLimit: "none", N: e.o.n, C: c, CreateRate: round(pace, 1)}
	timeout := e.o.timeout
	if pace > 0 {
		timeout = max(timeout, time.Duration(float64(e.o.n)/pace*float64(time.Second))+60*time.Second)
	}
	if err := e.prepare(ctx, p); err != nil {
		return p, err
	}
	w, cpu0, err := e.arm(ctx, p, v2Source(e.watch, p.Namespace))
	if err != nil {
		return p, err
	}
	defer w.stop()
	createdAt := make([]time.Time, e.o.n)
	t0 := time.Now()
	issued, err := work(ctx, e.o.n, c, pace, func(i int) error {
		b, err := e.books.WebappV2().Books(p.Namespace).Create(ctx, newBook(p.Namespace, i), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating Book %d: %w", i, err)
		}
		createdAt[i] = time.Now()
		return e.converge(ctx, b)
	})
	if err != nil {
		return p, fmt.Errorf("%s: %w", name, err)
	}
	p.CreateRateAchieved = round(issued, 1)
	if err := w.wait(ctx, timeout); err != nil {
		return p, fmt.Errorf("%s: %w", name, err)
	}
	e.finishCPU(p, cpu0)
	p.finishReady(t0, w.readyAt)
	at := make(map[string]time.Time, e.o.n)
	for i, t := range createdAt {
		at[bookName(i)] = t
	}
	p.latencies(at, w.readyAt)
	p.ConfigMaps = e.countConfigMaps(ctx, p.Namespace)
	p.Requests = map[string]float64{"POST": float64(2 * e.o.n), "PUT": float64(e.o.n)}
	p.Writes = writes(p.Requests)
	return p, nil
}

// converge does for one Book what the controller's sync does on a fresh
// one, and nothing else.
func (e *env) converge(ctx context.Context, b *webappv2.Book) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: b.Name, Namespace: b.Namespace,
			Labels: map[string]string{controller.ManagedByLabel: controller.ManagedByValue, controller.BookLabel: b.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(b,
				webappv2.SchemeGroupVersion.WithKind("Book"))},
		},
		Data: map[string]string{controller.TitleKey: b.Spec.Title, controller.PriceKey: strconv.Itoa(int(b.Spec.Price.WholeUnits()))},
	}
	if _, err := e.kube.CoreV1().ConfigMaps(b.Namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: controller.FieldManager}); err != nil {
		return err
	}
	b = b.DeepCopy()
	b.Status.ObservedGeneration = b.Generation
	b.Status.ConfigMapName = b.Name
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
		Type: controller.ConditionReady, Status: metav1.ConditionTrue, Reason: controller.ReasonConfigMapReady,
		Message: fmt.Sprintf("ConfigMap %s holds the current spec", b.Name), ObservedGeneration: b.Generation,
		LastTransitionTime: metav1.Now().Rfc3339Copy(),
	})
	_, err := e.books.WebappV2().Books(b.Namespace).UpdateStatus(ctx, b, metav1.UpdateOptions{FieldManager: controller.FieldManager})
	return err
}

// event creates the events.k8s.io Event the controllers emit for a new
// ConfigMap (reason ConfigMapCreated), as a plain POST.
func (e *env) event(ctx context.Context, b *webappv2.Book) error {
	now := metav1.NowMicro()
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", b.Name, now.UnixNano()), Namespace: b.Namespace},
		EventTime:  now, ReportingController: controller.ReportingController, ReportingInstance: "book-bench",
		Action: "Create", Reason: controller.EventConfigMapCreated, Type: corev1.EventTypeNormal,
		Note: "Created ConfigMap " + b.Name,
		Regarding: corev1.ObjectReference{APIVersion: webappv2.SchemeGroupVersion.String(), Kind: "Book",
			Namespace: b.Namespace, Name: b.Name, UID: b.UID, ResourceVersion: b.ResourceVersion},
		Related: &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: b.Namespace, Name: b.Name},
	}
	_, err := e.kube.EventsV1().Events(b.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}

// finishReady turns the Ready times into the convergence figures and a
// downsampled Ready-over-time series.
func (p *Phase) finishReady(t0 time.Time, readyAt map[string]time.Time) {
	ts := make([]float64, 0, len(readyAt))
	for _, t := range readyAt {
		ts = append(ts, t.Sub(t0).Seconds())
	}
	slices.Sort(ts)
	if len(ts) == 0 {
		return
	}
	p.FirstReadySeconds = round(ts[0], 3)
	p.ConvergeSeconds = round(ts[len(ts)-1], 3)
	p.BooksPerSecond = round(float64(len(ts))/ts[len(ts)-1], 1)
	step := max(1, len(ts)/200)
	p.Series = append(p.Series, [2]float64{0, 0})
	for i := 0; i < len(ts); i += step {
		p.Series = append(p.Series, [2]float64{round(ts[i], 3), float64(i + 1)})
	}
	p.Series = append(p.Series, [2]float64{round(ts[len(ts)-1], 3), float64(len(ts))})
}

func (p *Phase) latencies(createdAt, readyAt map[string]time.Time) {
	var ls []float64
	for name, c := range createdAt {
		if r, ok := readyAt[name]; ok {
			ls = append(ls, max(0, r.Sub(c).Seconds()*1000))
		}
	}
	slices.Sort(ls)
	if len(ls) == 0 {
		return
	}
	q := func(f float64) float64 { return round(ls[min(len(ls)-1, int(f*float64(len(ls))))], 1) }
	p.LatencyP50Ms, p.LatencyP99Ms, p.LatencyMaxMs = q(0.5), q(0.99), round(ls[len(ls)-1], 1)
}

// writeTimes writes, per Book, when its Create returned and when it was seen
// Ready, in seconds from t0: for looking into a latency tail by hand.
func writeTimes(path string, t0 time.Time, createdAt, readyAt map[string]time.Time) error {
	var b strings.Builder
	b.WriteString("book,created,ready\n")
	names := slices.Sorted(maps.Keys(createdAt))
	for _, n := range names {
		fmt.Fprintf(&b, "%s,%.3f,%.3f\n", n, createdAt[n].Sub(t0).Seconds(), readyAt[n].Sub(t0).Seconds())
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
