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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/controller"
)

// The live writer of the restart-live phase: liveOps creates and as many
// edits, each at liveRate per second, interleaved, from liveDelay after
// the restarted process starts.
const (
	liveOps   = 100
	liveRate  = 50.0
	liveDelay = 200 * time.Millisecond
)

// restartLiveConfigs are the configurations the restart-live and
// failover-live phases can run (-live-configs, all by default): ours, ours
// in arrival order (--live-first=false), the tuned twin.
var restartLiveConfigs = []string{"ours", "ours-fifo", "twin-tuned"}

// restartLiveUnit converges N Books with the first configuration (its
// backlog phase, returned too), then for each configuration in turn
// restarts it over them under the live writer (restartLive). Configurations
// of one binary (ours and ours-fifo) share the N Books: what they converge
// is the same, and the 3 to 4 minutes of creating and deleting 50,000 Books
// are spent once.
func (e *env) restartLiveUnit(ctx context.Context, configs []string) (*Phase, []*LiveRestart, error) {
	setup, err := e.backlogPhase(ctx, "restart-live-"+strings.Join(configs, "-")+"-setup", e.controller(configs[0]))
	if err != nil {
		return setup, nil, err
	}
	var out []*LiveRestart
	for run, config := range configs {
		x, err := e.restartLive(ctx, setup.Namespace, config, run)
		if x != nil {
			out = append(out, x)
		}
		if err != nil {
			return setup, out, err
		}
	}
	return setup, out, nil
}

// restartLive restarts the configuration over the converged Books of ns,
// and from liveDelay after the new process starts creates liveOps new
// Books and edits liveOps of the N, at liveRate each (run numbers the
// writer's names and titles apart from an earlier run's). How long each
// live write took to land (create → Ready, edit → the ConfigMap holding the
// new title), counted from the write or from the moment the caches were
// synced, whichever is later, and counted from the write alone; when the
// restarted controller went idle; and the converged objects it wrote.
func (e *env) restartLive(ctx context.Context, ns, config string, run int) (*LiveRestart, error) {
	s := e.controller(config)
	books, titles, before, err := e.watchLive(ctx, ns)
	if err != nil {
		return nil, err
	}
	defer books.stop()
	defer titles.stop()
	x := &LiveRestart{Round: e.round, Config: config, Controller: s.Name, Namespace: ns, N: e.o.n, Run: run,
		Converged: before.books(), NewBooks: liveOps, Edits: liveEdits(e.o.n)}
	// The first restart of a unit comes right after the set-up converged N
	// Books, the next right after the first; without settling the API
	// server's work and garbage left over from either falls on one
	// configuration only.
	x.OtherCoresBusyAtStart, x.APIServerGC = e.settle(ctx)
	pr, err := e.startController(s, ns, e.logName("restart-live-"+config))
	if err != nil {
		return nil, err
	}
	defer stopIfRunning(pr)
	synced := make(chan time.Time, 1)
	go func() { synced <- waitReadyz(ctx, pr) }()
	time.Sleep(time.Until(pr.start.Add(liveDelay)))
	created, edited, err := e.writeLive(ctx, ns, run)
	if err != nil {
		return nil, err
	}
	syncedAt := <-synced
	if syncedAt.IsZero() {
		return nil, fmt.Errorf("restart-live: %s never became ready", s.Name)
	}
	x.SyncedSeconds = round(syncedAt.Sub(pr.start).Seconds(), 3)
	if err := e.waitLanded(ctx, books, titles, created, edited, run); err != nil {
		return nil, err
	}
	x.latencies(syncedAt, created, books.readyAt, edited, titles.snapshot())
	if x.IdleSeconds, err = e.waitIdle(ctx, pr, false); err != nil {
		return nil, err
	}
	x.UntouchedWritten, err = e.untouchedWritten(ctx, ns, before, edited)
	return x, err
}

// watchLive starts the watches that time the live writes, and takes the
// resourceVersions of what is there before the restart.
func (e *env) watchLive(ctx context.Context, ns string) (*readyWatch, *titleWatch, versions, error) {
	before, err := e.versions(ctx, ns)
	if err != nil {
		return nil, nil, nil, err
	}
	books, err := e.watchReady(ctx, ns, before.books()+liveOps)
	if err != nil {
		return nil, nil, nil, err
	}
	return books, e.watchTitles(ctx, ns), before, nil
}

// waitReadyz returns when the controller's /readyz first answered 200, or
// the zero time if it exited or the context ended first.
func waitReadyz(ctx context.Context, pr *proc) time.Time {
	for ctx.Err() == nil && !pr.exited() {
		if pr.ready() {
			return time.Now()
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}
}

// liveEdits is how many of n Books the live writer edits: liveOps, or
// every Book when there are fewer. editedName is the i-th of them.
func liveEdits(n int) int { return min(liveOps, n) }

func editedName(i, n int) string { return bookName(i * n / liveEdits(n)) }

// liveName names the new Books of the live writer's run.
func liveName(run, i int) string { return fmt.Sprintf("live%d-%05d", run, i) }

// editedTitle is the title the live writer's run gives the i-th edited
// Book.
func editedTitle(run, i int) string {
	return "edited during restart " + strconv.Itoa(run) + ", " + strconv.Itoa(i)
}

// writeLive creates liveOps Books and edits liveEdits of the N, alternating,
// at 2 × liveRate operations per second; it returns when each returned.
func (e *env) writeLive(ctx context.Context, ns string, run int) (created, edited map[string]time.Time, err error) {
	var mu sync.Mutex
	created, edited = map[string]time.Time{}, map[string]time.Time{}
	client := e.books.WebappV2().Books(ns)
	_, err = work(ctx, 2*liveOps, 8, 2*liveRate, func(op int) error {
		i := op / 2
		if op%2 == 0 {
			b := newBook(ns, i)
			b.Name = liveName(run, i)
			if _, err := client.Create(ctx, b, metav1.CreateOptions{}); err != nil {
				return err
			}
			mu.Lock()
			created[b.Name] = time.Now()
			mu.Unlock()
			return nil
		}
		if i >= liveEdits(e.o.n) {
			return nil
		}
		name := editedName(i, e.o.n)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			b, err := client.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			b.Spec.Title = editedTitle(run, i)
			_, err = client.Update(ctx, b, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return err
		}
		mu.Lock()
		edited[name] = time.Now()
		mu.Unlock()
		return nil
	})
	return created, edited, err
}

// titleWatch records when each ConfigMap of a namespace first held each
// title.
type titleWatch struct {
	mu     sync.Mutex
	seen   map[string]time.Time // name + "\x00" + title → first seen
	cancel context.CancelFunc
	done   chan struct{}
}

func (e *env) watchTitles(ctx context.Context, ns string) *titleWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &titleWatch{seen: map[string]time.Time{}, cancel: cancel, done: make(chan struct{})}
	client := e.kube.CoreV1().ConfigMaps(ns)
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			wi, err := client.Watch(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range wi.ResultChan() {
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type != watch.Deleted {
					w.observe(cm)
				}
			}
			wi.Stop()
		}
	}()
	return w
}

func (w *titleWatch) observe(cm *corev1.ConfigMap) {
	k := cm.Name + "\x00" + cm.Data[controller.TitleKey]
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.seen[k]; !ok {
		w.seen[k] = time.Now()
	}
}

// landed returns when the ConfigMap name first held title.
func (w *titleWatch) landed(name, title string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.seen[name+"\x00"+title]
	return t, ok
}

func (w *titleWatch) snapshot() map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]time.Time, len(w.seen))
	for k, v := range w.seen {
		out[k] = v
	}
	return out
}

func (w *titleWatch) stop() {
	w.cancel()
	<-w.done
}

// waitLanded waits until every new Book is Ready and every edit is in its
// ConfigMap.
func (e *env) waitLanded(ctx context.Context, books *readyWatch, titles *titleWatch, created, edited map[string]time.Time, run int) error {
	return poll.Until(ctx, "the live writes to land", 50*time.Millisecond, e.o.timeout, func(context.Context) error {
		books.mu.Lock()
		ready := 0
		for name := range created {
			if _, ok := books.readyAt[name]; ok {
				ready++
			}
		}
		books.mu.Unlock()
		landed := 0
		for i := range liveEdits(e.o.n) {
			if _, ok := titles.landed(editedName(i, e.o.n), editedTitle(run, i)); ok {
				landed++
			}
		}
		return poll.Done(ready == len(created) && landed == len(edited), "%d of %d new Books Ready, %d of %d edits landed",
			ready, len(created), landed, len(edited))
	})
}

// waitIdle returns, in seconds from the process start, when the controller
// went idle: empty queue, no active worker, no request for 2 s. With leader
// election the Lease is renewed every 2 s, so there "no request" is "no
// reconcile" (either controller's reconcile counter).
func (e *env) waitIdle(ctx context.Context, pr *proc, leaderElected bool) (float64, error) {
	const quiet = 2 * time.Second
	var quietSince time.Time
	last := -1.0
	deadline := time.Now().Add(e.o.timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil && !pr.exited() {
		time.Sleep(50 * time.Millisecond)
		m, err := scrape(pr.metricsAddr)
		if err != nil {
			quietSince = time.Time{}
			continue
		}
		total := sumMap(m.requests())
		if leaderElected {
			total = m.value("book_controller_reconcile_total") + m.value("controller_runtime_reconcile_total")
		}
		if m.value("workqueue_depth") != 0 || m.value("book_controller_active_workers") != 0 || total != last {
			quietSince, last = time.Time{}, total
			continue
		}
		if quietSince.IsZero() {
			quietSince = time.Now()
		}
		if time.Since(quietSince) >= quiet {
			return round(quietSince.Sub(pr.start).Seconds(), 3), nil
		}
	}
	return 0, errors.New("not idle in time")
}

// latencies fills in the percentiles of the live writes.
func (x *LiveRestart) latencies(synced time.Time, created, readyAt, edited, seen map[string]time.Time) {
	var c, cRaw, ed, edRaw []float64
	for name, at := range created {
		if r, ok := readyAt[name]; ok {
			c = append(c, ms(r.Sub(later(at, synced))))
			cRaw = append(cRaw, ms(r.Sub(at)))
		}
	}
	for i := range liveEdits(x.N) {
		name := editedName(i, x.N)
		at, ok1 := edited[name]
		l, ok2 := seen[name+"\x00"+editedTitle(x.Run, i)]
		if ok1 && ok2 {
			ed = append(ed, ms(l.Sub(later(at, synced))))
			edRaw = append(edRaw, ms(l.Sub(at)))
		}
	}
	x.CreateP50Ms, x.CreateP99Ms = quantiles(c)
	x.CreateRawP50Ms, x.CreateRawP99Ms = quantiles(cRaw)
	x.EditP50Ms, x.EditP99Ms = quantiles(ed)
	x.EditRawP50Ms, x.EditRawP99Ms = quantiles(edRaw)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func ms(d time.Duration) float64 { return max(0, d.Seconds()*1000) }

// quantiles is the p50 and p99 of ls, in the phases' convention.
func quantiles(ls []float64) (p50, p99 float64) {
	if len(ls) == 0 {
		return 0, 0
	}
	slices.Sort(ls)
	q := func(f float64) float64 { return round(ls[min(len(ls)-1, int(f*float64(len(ls))))], 1) }
	return q(0.5), q(0.99)
}

// versions are the resourceVersions of a namespace's Books and managed
// ConfigMaps, by kind and name.
type versions map[string]string

func (e *env) versions(ctx context.Context, ns string) (versions, error) {
	out := versions{}
	books, err := e.books.WebappV2().Books(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Books: %w", err)
	}
	for _, b := range books.Items {
		out["Book/"+b.Name] = b.ResourceVersion
	}
	cms, err := e.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: controller.ManagedBySelector})
	if err != nil {
		return nil, fmt.Errorf("listing ConfigMaps: %w", err)
	}
	for _, cm := range cms.Items {
		out["ConfigMap/"+cm.Name] = cm.ResourceVersion
	}
	return out, nil
}

// books counts the Books among the versions.
func (v versions) books() int {
	n := 0
	for k := range v {
		if strings.HasPrefix(k, "Book/") {
			n++
		}
	}
	return n
}

// untouchedWritten counts the Books and ConfigMaps of before that the live
// writer did not edit and whose resourceVersion changed since: writes the
// restarted (or new) leader made to Books that were already converged,
// which must be none.
func (e *env) untouchedWritten(ctx context.Context, ns string, before versions, edited map[string]time.Time) (int, error) {
	after, err := e.versions(ctx, ns)
	if err != nil {
		return 0, err
	}
	n := 0
	for k, rv := range before {
		_, name, _ := strings.Cut(k, "/")
		if _, ok := edited[name]; !ok && after[k] != rv {
			n++
		}
	}
	return n, nil
}
