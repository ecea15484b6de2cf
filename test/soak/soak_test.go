//go:build soak && linux

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

package soak

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/test/integration/framework"
)

// config is the run's scale, from the environment (the Makefile's
// DURATION, SOAK_BOOKS, ...).
type config struct {
	duration   time.Duration // SOAK_DURATION: how long the churn and the faults go on
	books      int           // SOAK_BOOKS
	namespaces int           // SOAK_NAMESPACES: the Books are spread over them
	seed       uint64        // SOAK_SEED
	out        string        // SOAK_OUT: where the CSVs go
}

func readConfig() (config, error) {
	c := config{duration: 30 * time.Minute, books: 5000, namespaces: 20, seed: uint64(time.Now().UnixNano()),
		out: filepath.Join(framework.RepoRoot(), "_output", "soak")}
	if s := os.Getenv("SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Minute {
			return c, fmt.Errorf("SOAK_DURATION=%q: want a duration of at least 1m, such as 30m", s)
		}
		c.duration = d
	}
	for _, v := range []struct {
		name string
		dst  *int
	}{{"SOAK_BOOKS", &c.books}, {"SOAK_NAMESPACES", &c.namespaces}} {
		if s := os.Getenv(v.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return c, fmt.Errorf("%s=%q: want a positive integer", v.name, s)
			}
			*v.dst = n
		}
	}
	if c.books < c.namespaces {
		return c, fmt.Errorf("SOAK_BOOKS=%d is fewer than SOAK_NAMESPACES=%d", c.books, c.namespaces)
	}
	if s := os.Getenv("SOAK_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return c, fmt.Errorf("SOAK_SEED=%q: want an unsigned integer", s)
		}
		c.seed = n
	}
	if s := os.Getenv("SOAK_OUT"); s != "" {
		c.out = s
	}
	return c, nil
}

// faultPeriod is the time between two faults, which alternate between an
// API server restart and a leader kill: an eighth of the run, at least 75 s
// (a 5-minute run then has two restarts and one kill, each with time to
// recover before the next) and at most 4 minutes.
func faultPeriod(d time.Duration) time.Duration {
	return min(max(d/8, 75*time.Second), 4*time.Minute)
}

// namespacePeriod is the time between two namespace deletions: a fifth of
// the run, at least 50 s.
func namespacePeriod(d time.Duration) time.Duration {
	return max(d/5, 50*time.Second)
}

const (
	leaseNS = "soak-system"
	leaseID = "book-controller-soak"
	// sampleEvery is the scrape period: each scrape of heap in use lands
	// anywhere in a GC cycle, 1 MiB about its level (Limits.HeapNoise),
	// and a 5-minute run's heap slope is fitted to the scrapes of about
	// two settled minutes, so it needs them all the more often.
	sampleEvery = 5 * time.Second
	// opEvery paces the churn of single objects: ten changes a second, as
	// much as the shared 2-core machine sustains next to two replicas and
	// the control plane.
	opEvery = 100 * time.Millisecond
)

// Production-like leader timings (kube-controller-manager's are 15/10/2 s):
// a renew deadline longer than an API server restart takes, so a restart
// alone does not cost the leader its Lease; SIGKILL does.
var timings = framework.LeaderTimings{LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second, RetryPeriod: 2 * time.Second}

// soak is one run's state.
type soak struct {
	t     *testing.T
	env   *framework.Env
	bin   string
	cfg   config
	start time.Time // the churn's start

	mu     sync.Mutex
	slots  map[string]*slot
	want   map[string]map[string]bool // namespace → names of the Books that should exist
	busyNS string                     // the namespace being deleted and recreated
	faults []Fault

	samplesMu sync.Mutex
	samples   []Sample

	// pause is held by an API server restart from the kill until
	// gcSettle after the restart; every change of the churn holds it for
	// reading. See gcSettle.
	pause sync.RWMutex

	ops, opErrors, nsCycles, unexpectedExits, gcRestarts, gcWaiters atomic.Int64
}

// gcSettle is how long the churn stays paused after kube-apiserver is back.
// kube-controller-manager's garbage collector relists after a restart
// (its watches' resourceVersions are older than the new API server's watch
// cache); a Book deleted and created again under the same name before that
// relist reaches it as an update of one key, not as a deletion, and the
// earlier Book's ConfigMap is then never collected (kube-controller-manager
// v1.37.2, seen in the first 5-minute soak: 16 Books left in
// ConfigMapOfEarlierBook). Real clusters see API server restarts but rarely
// a same-name recreate within seconds of one; the soak waits until the
// collector's informers are back rather than measure that gap.
const gcSettle = 30 * time.Second

// slot is one of the two replicas' places; a killed replica is replaced in
// its slot by the next generation.
type slot struct {
	name    string
	gen     int
	started time.Time
	r       *framework.Replica
	killed  bool // by the soak: not an unexpected exit
}

func (s *soak) since(t time.Time) time.Duration { return t.Sub(s.start) }

func nsName(i int) string { return fmt.Sprintf("soak-%02d", i) }

// booksIn is how many Books namespace i holds: the Books spread evenly.
func (s *soak) booksIn(i int) int {
	n := s.cfg.books / s.cfg.namespaces
	if i < s.cfg.books%s.cfg.namespaces {
		n++
	}
	return n
}

func TestSoak(t *testing.T) {
	cfg, err := readConfig()
	if err != nil {
		t.Fatal(err)
	}
	limits := DefaultLimits(cfg.duration)
	t.Logf("soak: duration %v, %d Books in %d namespaces, seed %d, fault period %v, namespace period %v, warm-up %v",
		cfg.duration, cfg.books, cfg.namespaces, cfg.seed, faultPeriod(cfg.duration), namespacePeriod(cfg.duration), limits.Warmup)
	bin, err := framework.BuildController()
	if err != nil {
		t.Fatal(err)
	}
	env, err := framework.Setup(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Teardown)
	s := &soak{t: t, env: env, bin: bin, cfg: cfg, slots: map[string]*slot{}, want: map[string]map[string]bool{}}

	setupStart := time.Now()
	env.NamedNamespaces(t, leaseNS)
	for i := range cfg.namespaces {
		env.NamedNamespaces(t, nsName(i))
		s.want[nsName(i)] = map[string]bool{}
	}
	var all []*webappv2.Book
	for i := range cfg.namespaces {
		books := framework.NumberedBooks(nsName(i), "book", s.booksIn(i))
		for _, b := range books {
			s.want[b.Namespace][b.Name] = true
		}
		all = append(all, books...)
	}
	env.CreateAll(t, all)
	for _, name := range []string{"a", "b"} {
		s.slots[name] = &slot{name: name}
		s.startReplica(s.slots[name])
	}
	poll.Eventually(t, "every Book Ready before the churn", 5*time.Second, 15*time.Minute, s.converged)
	t.Logf("soak: %d Books Ready %v after the setup started", cfg.books, time.Since(setupStart).Round(time.Second))

	// The churn, the namespace deletions and the sampler run in goroutines
	// of their own that never stop the test (t.Errorf only); the faults and
	// the replicas' restarts run here, where t.Fatal may be called.
	s.start = time.Now()
	ctx, stopChurn := context.WithCancel(t.Context())
	sampleCtx, stopSampling := context.WithCancel(t.Context())
	var churn, sampler sync.WaitGroup
	rng := rand.New(rand.NewPCG(cfg.seed, 1))
	churn.Go(func() { s.churnObjects(ctx, rand.New(rand.NewPCG(cfg.seed, 2))) })
	churn.Go(func() { s.churnNamespaces(ctx, rand.New(rand.NewPCG(cfg.seed, 3))) })
	sampler.Go(func() { s.sample(sampleCtx) })

	s.faultLoop(rng)
	stopChurn()
	churn.Wait()
	churnEnd := s.since(time.Now())
	t.Logf("soak: churn stopped after %v: %d changes (%d failed), %d namespaces deleted and recreated, %d faults",
		churnEnd.Round(time.Second), s.ops.Load(), s.opErrors.Load(), s.nsCycles.Load(), len(s.faults))

	// A bounded wait for the end state, the replicas still sampled and
	// still restarted should one exit.
	finalWait := 5*time.Minute + time.Duration(cfg.books/1000)*time.Minute
	lastErr := s.awaitEnd(finalWait)
	if lastErr != nil && s.onlyGCWaiters() {
		// Every Book left waits for the garbage collector, which lost
		// track of the earlier Books' ConfigMaps (see gcSettle): restart
		// it, as an operator would, so that it rebuilds its graph, and
		// say so in the summary. The controller has done its part.
		s.gcRestarts.Add(1)
		t.Logf("soak: %d Books wait for the garbage collector after %v: restarting kube-controller-manager", s.gcWaiters.Load(), finalWait)
		if err := env.Cluster.KillControllerManager(); err != nil {
			t.Fatal(err)
		}
		if err := env.Cluster.StartControllerManager(t.Context()); err != nil {
			t.Fatal(err)
		}
		lastErr = s.awaitEnd(3 * time.Minute)
	}
	settled := s.since(time.Now()) - churnEnd
	stopSampling()
	sampler.Wait()
	lost, notReady, extra, err := s.tally(context.Background())
	if err != nil {
		t.Errorf("the end state could not be read: %v", err)
	}
	if lastErr != nil {
		t.Errorf("not converged %v after the churn stopped: %v", finalWait, lastErr)
	}

	s.samplesMu.Lock()
	samples := slices.Clone(s.samples)
	s.samplesMu.Unlock()
	report := Analyze(samples, s.faults, churnEnd, limits)
	if err := s.write(samples, churnEnd, limits); err != nil {
		t.Errorf("writing the series: %v", err)
	}
	for _, sr := range report.Stretches {
		t.Logf("soak: stretch %s %v..%v judged=%v heap base %.1f MiB, goroutines %+.2f/min (base %.0f), FDs %+.2f/min (base %.0f, last %.0f), %d fault returns checked",
			sr.Name, sr.From.Round(time.Second), sr.To.Round(time.Second), sr.Judged, sr.HeapBase/(1<<20),
			sr.GoroutineSlope, sr.GoroutineBase, sr.FDSlope, sr.FDBase, sr.FDLast, sr.Returns)
	}
	for _, hr := range report.Heaps {
		t.Logf("soak: heap of %s %v..%v judged=%v settled slope %+.3f MiB/min (limit %.2f: 2 standard errors %.2f or 1) over %d segments (%v in all), floor rise %+.1f MiB",
			hr.Name, hr.From.Round(time.Second), hr.To.Round(time.Second), hr.Judged, hr.Slope/(1<<20), hr.Limit/(1<<20), 2*hr.StdErr/(1<<20),
			hr.Segments, hr.Fit.Round(time.Second), hr.Rise/(1<<20))
	}
	for _, p := range report.Problems {
		t.Errorf("soak: %s", p)
	}
	if lost+notReady+extra > 0 {
		t.Errorf("soak: %d Books lost, %d not Ready for their generation (or their ConfigMap not matching), %d that should not exist", lost, notReady, extra)
	}
	result := "PASS"
	if t.Failed() {
		result = "FAIL"
	}
	kinds := map[string]int{}
	for _, f := range s.faults {
		kinds[f.Kind]++
	}
	// One line for .ci/run's summary: written to summary.txt, which make
	// test-soak prints after the test, since go test shows a passing
	// package's output only under -v.
	line := fmt.Sprintf("soak: %v, %d Books (%d lost, %d not Ready, %d extra; converged %v after the churn), %d changes, %d namespace cycles, faults: %d API server restarts + %d leader kills, %d unexpected exits, %d kube-controller-manager restarts for %d Books waiting for the garbage collector; warm-up %v, %d stretches judged, %d processes' heap judged, %d fault returns; %s; %s\n",
		cfg.duration, cfg.books, lost, notReady, extra, settled.Round(time.Second), s.ops.Load(), s.nsCycles.Load(),
		kinds["apiserver-restart"], kinds["leader-kill"], s.unexpectedExits.Load(), s.gcRestarts.Load(), s.gcWaiters.Load(), limits.Warmup, report.Judged, report.HeapJudged, report.Returns,
		worst(report), result)
	t.Log(line)
	if err := os.WriteFile(filepath.Join(cfg.out, "summary.txt"), []byte(line), 0o644); err != nil {
		t.Errorf("writing the summary: %v", err)
	}
}

// awaitEnd waits up to bound for the end state (converged), restarting any
// replica that exits meanwhile, and returns the last state seen if it
// never came.
func (s *soak) awaitEnd(bound time.Duration) error {
	var lastErr error
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		s.restartExited()
		if lastErr = s.converged(s.t.Context()); lastErr == nil {
			return nil
		}
		select {
		case <-s.t.Context().Done():
			return lastErr
		case <-time.After(5 * time.Second):
		}
	}
	return lastErr
}

// onlyGCWaiters reports whether every Book not converged is a Book waiting
// for the garbage collector, and records how many.
func (s *soak) onlyGCWaiters() bool {
	lost, notReady, extra, waiting, err := s.tallyGC(s.t.Context())
	s.gcWaiters.Store(int64(waiting))
	return err == nil && lost == 0 && extra == 0 && notReady > 0 && notReady == waiting
}

// worst sums up the figures: the largest slopes (the heap's of the
// processes judged) and the baselines of the longest judged stretch.
func worst(r Report) string {
	var heap, gor, fd float64
	var longest StretchReport
	found := false
	for _, sr := range r.Stretches {
		if !sr.Judged {
			continue
		}
		if !found {
			gor, fd = sr.GoroutineSlope, sr.FDSlope
		}
		gor, fd = max(gor, sr.GoroutineSlope), max(fd, sr.FDSlope)
		if !found || sr.To-sr.From > longest.To-longest.From {
			longest = sr
		}
		found = true
	}
	if !found {
		return "no stretch judged"
	}
	heapFound := false
	for _, hr := range r.Heaps {
		if hr.Judged {
			if !heapFound || hr.Slope > heap {
				heap = hr.Slope
			}
			heapFound = true
		}
	}
	return fmt.Sprintf("max slopes: heap %+.3f MiB/min (settled), goroutines %+.2f/min, FDs %+.2f/min; baselines (%s): heap %.1f MiB, %.0f goroutines, %.0f FDs",
		heap/(1<<20), gor, fd, longest.Name, longest.HeapBase/(1<<20), longest.GoroutineBase, longest.FDBase)
}

// startReplica starts the slot's next generation: every namespace watched
// ("--namespace=" after StartReplica's own --namespace, which names the
// Lease's namespace), leader election on.
func (s *soak) startReplica(sl *slot) {
	r := s.env.StartReplica(s.t, s.bin, fmt.Sprintf("replica-%s%d", sl.name, sl.gen), framework.ReplicaOptions{
		Namespace: leaseNS, LeaseID: leaseID, Timings: timings, Args: []string{"--namespace="},
	})
	s.mu.Lock()
	sl.r, sl.started, sl.killed = r, time.Now(), false
	s.mu.Unlock()
}

// restartExited replaces any replica that exited without the soak killing
// it (an exit after a lost Lease, a crash): a Deployment would restart it.
func (s *soak) restartExited() {
	for _, name := range []string{"a", "b"} {
		sl := s.slots[name]
		if sl.r.Running() {
			continue
		}
		if !sl.killed {
			s.unexpectedExits.Add(1)
			code, _ := sl.r.ExitCode()
			s.t.Logf("soak: replica %s%d exited by itself (code %d) at %v; last lines:\n%s", sl.name, sl.gen, code,
				s.since(time.Now()).Round(time.Second), sl.r.Tail(15))
		}
		s.mu.Lock()
		sl.gen++
		s.mu.Unlock()
		s.startReplica(sl)
	}
}

// faultLoop injects the faults until the run's duration has passed:
// API server restart, leader kill, API server restart, ...
func (s *soak) faultLoop(rng *rand.Rand) {
	period := faultPeriod(s.cfg.duration)
	end := s.start.Add(s.cfg.duration)
	next := s.start.Add(period)
	for i := 0; ; {
		s.restartExited()
		now := time.Now()
		if !now.Before(end) {
			return
		}
		if !now.Before(next) {
			if i%2 == 0 {
				s.restartAPIServer()
			} else {
				s.killLeader()
			}
			i++
			// A little jitter, so the faults don't fall in step with the
			// namespace deletions.
			next = next.Add(period + time.Duration(rng.Int64N(int64(5*time.Second))))
		}
		select {
		case <-s.t.Context().Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (s *soak) addFault(kind string, at, end time.Time) {
	s.mu.Lock()
	s.faults = append(s.faults, Fault{Kind: kind, At: s.since(at), End: s.since(end)})
	s.mu.Unlock()
	s.t.Logf("soak: %s at %v, over after %v", kind, s.since(at).Round(time.Second), end.Sub(at).Round(100*time.Millisecond))
}

// restartAPIServer kills kube-apiserver (SIGKILL) and starts it again at
// once: every watch breaks and every request fails until it is back.
func (s *soak) restartAPIServer() {
	s.pause.Lock()
	defer s.pause.Unlock()
	at := time.Now()
	if err := s.env.Cluster.KillAPIServer(); err != nil {
		s.t.Fatalf("killing kube-apiserver: %v", err)
	}
	ctx, cancel := context.WithTimeout(s.t.Context(), 3*time.Minute)
	defer cancel()
	if err := s.env.Cluster.StartAPIServer(ctx); err != nil {
		s.t.Fatalf("starting kube-apiserver again: %v", err)
	}
	s.addFault("apiserver-restart", at, time.Now())
	select {
	case <-s.t.Context().Done():
	case <-time.After(gcSettle):
	}
}

// killLeader SIGKILLs the replica holding the Lease, waits until the other
// holds it, and starts the killed one's next generation as a standby.
func (s *soak) killLeader() {
	holder := s.env.LeaseHolder(s.t.Context(), leaseNS, leaseID)
	var victim, other *slot
	for _, sl := range s.slots {
		if sl.r.Identity == holder {
			victim = sl
		} else {
			other = sl
		}
	}
	if victim == nil {
		s.t.Logf("soak: no replica holds the Lease (holder %q); the leader kill is skipped", holder)
		return
	}
	at := time.Now()
	s.mu.Lock()
	victim.killed = true
	s.mu.Unlock()
	if err := victim.r.Kill(); err != nil {
		s.t.Fatal(err)
	}
	poll.Eventually(s.t, "the standby to take the Lease over", 500*time.Millisecond, timings.LeaseDuration+time.Minute,
		s.env.LeaseHeldBy(leaseNS, leaseID, other.r.Identity))
	s.addFault("leader-kill", at, time.Now())
	s.mu.Lock()
	victim.gen++
	s.mu.Unlock()
	s.startReplica(victim)
}

// churnObjects changes one object every opEvery until ctx ends: a Book's
// spec edited, a Book deleted and created again, its ConfigMap tampered
// with or deleted. An operation that fails while the API server is down is
// retried (RetryTransient), so the churn pauses with it.
func (s *soak) churnObjects(ctx context.Context, rng *rand.Rand) {
	tick := time.NewTicker(opEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		i := rng.IntN(s.cfg.namespaces)
		ns, name := nsName(i), framework.BookName("book", rng.IntN(s.booksIn(i)))
		s.mu.Lock()
		busy := ns == s.busyNS
		s.mu.Unlock()
		if busy {
			continue
		}
		s.pause.RLock()
		var err error
		switch p := rng.IntN(100); {
		case p < 40:
			err = s.editBook(ctx, ns, name, rng)
		case p < 60:
			err = s.recreateBook(ctx, ns, name)
		case p < 80:
			err = s.tamperConfigMap(ctx, ns, name)
		default:
			err = framework.RetryTransient(ctx, func() error {
				return s.env.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
			})
		}
		s.pause.RUnlock()
		s.ops.Add(1)
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			// A change refused as malformed is the churn's own bug, never
			// a fault's: it would leave the soak without that churn.
			if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
				s.t.Errorf("soak: the API server refused a change of %s/%s as malformed: %v", ns, name, err)
			}
			if s.opErrors.Add(1) <= 5 {
				s.t.Logf("soak: a change of %s/%s failed: %v", ns, name, err)
			}
		}
	}
}

func (s *soak) editBook(ctx context.Context, ns, name string, rng *rand.Rand) error {
	// A whole amount without a currency, so that the ConfigMap keeps its
	// two keys (holdsSpec).
	patch := fmt.Sprintf(`{"spec":{"price":{"amount":"%d","currency":%q},"title":"Title of %s, edition %d"}}`,
		rng.IntN(10000), webappv2.NoCurrency, name, rng.IntN(100))
	return framework.RetryTransient(ctx, func() error {
		_, err := s.env.Books.WebappV2().Books(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	})
}

// recreateBook deletes the Book and creates it again under the same name:
// its ConfigMap, owned by the earlier Book, is the garbage collector's
// until it is gone, and the controller must create the new one's.
func (s *soak) recreateBook(ctx context.Context, ns, name string) error {
	err := framework.RetryTransient(ctx, func() error {
		return s.env.Books.WebappV2().Books(ns).Delete(ctx, name, metav1.DeleteOptions{})
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	s.mu.Lock()
	delete(s.want[ns], name)
	s.mu.Unlock()
	return s.createBook(context.WithoutCancel(ctx), ns, name)
}

// createBook creates the Book and records that it should exist; a create
// whose answer was lost finds the Book on its retry.
func (s *soak) createBook(ctx context.Context, ns, name string) error {
	err := framework.RetryTransient(ctx, func() error {
		_, err := s.env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, name, "Title of "+name, 1), metav1.CreateOptions{})
		return err
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Book %s/%s: %w", ns, name, err)
	}
	s.mu.Lock()
	s.want[ns][name] = true
	s.mu.Unlock()
	return nil
}

func (s *soak) tamperConfigMap(ctx context.Context, ns, name string) error {
	patch := fmt.Sprintf(`{"data":{%q:"tampered","extra":"x"}}`, controller.TitleKey)
	return framework.RetryTransient(ctx, func() error {
		_, err := s.env.Kube.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	})
}

// churnNamespaces deletes a whole namespace every namespacePeriod, waits
// until it is gone, and creates it again with its Books. A cycle that has
// begun is finished even after ctx ends, so the end state has every
// namespace.
func (s *soak) churnNamespaces(ctx context.Context, rng *rand.Rand) {
	period := namespacePeriod(s.cfg.duration)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(period / 2):
		}
		i := rng.IntN(s.cfg.namespaces)
		if err := s.namespaceCycle(context.WithoutCancel(ctx), i); err != nil {
			s.t.Errorf("soak: deleting and recreating %s: %v", nsName(i), err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period / 2):
		}
	}
}

func (s *soak) namespaceCycle(ctx context.Context, i int) error {
	ns := nsName(i)
	s.mu.Lock()
	s.busyNS = ns
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.busyNS = ""
		s.mu.Unlock()
	}()
	at := s.since(time.Now())
	err := framework.RetryTransient(ctx, func() error {
		return s.env.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.want[ns] = map[string]bool{}
	s.mu.Unlock()
	// The namespace controller deletes the Books, the garbage collector
	// their ConfigMaps; with 250 of each this takes seconds, longer while
	// the API server restarts.
	if err := poll.Until(ctx, "namespace "+ns+" to be gone", time.Second, 5*time.Minute, func(ctx context.Context) error {
		_, err := s.env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	}); err != nil {
		return err
	}
	err = framework.RetryTransient(ctx, func() error {
		_, err := s.env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, framework.CreateWidth)
	n := s.booksIn(i)
	for w := range framework.CreateWidth {
		wg.Go(func() {
			for j := w; j < n; j += framework.CreateWidth {
				if err := s.createBook(ctx, ns, framework.BookName("book", j)); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.nsCycles.Add(1)
	s.t.Logf("soak: namespace %s deleted at %v and recreated with %d Books %v later", ns, at.Round(time.Second), n,
		(s.since(time.Now()) - at).Round(time.Second))
	return nil
}

// sample scrapes every replica every sampleEvery until ctx ends.
func (s *soak) sample(ctx context.Context) {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		for _, name := range []string{"a", "b"} {
			s.mu.Lock()
			sl := s.slots[name]
			r, gen, started := sl.r, sl.gen, sl.started
			s.mu.Unlock()
			if !r.Running() {
				continue
			}
			fams, err := framework.ScrapeMetrics(r.MetricsAddr)
			if err != nil {
				s.t.Logf("soak: scraping %s: %v", r.Name, err)
				continue
			}
			v := func(name string, labels ...string) float64 {
				x, err := framework.MetricValue(fams, name, labels...)
				if err != nil {
					s.t.Errorf("soak: %v", err)
				}
				return x
			}
			x := Sample{At: s.since(now), Slot: name, Gen: gen, Started: s.since(started),
				Leader:     v("leader_election_master_status") > 0,
				Heap:       v("go_memstats_heap_inuse_bytes"),
				Goroutines: v("go_goroutines"),
				FDs:        v("process_open_fds"),
				Depth:      v("workqueue_depth", "name", "book"),
			}
			s.samplesMu.Lock()
			s.samples = append(s.samples, x)
			s.samplesMu.Unlock()
		}
	}
}

// converged is a check that every namespace holds exactly the Books that
// should exist, each Ready for its generation with its ConfigMap holding
// its spec.
func (s *soak) converged(ctx context.Context) error {
	lost, notReady, extra, err := s.tally(ctx)
	if err != nil {
		return err
	}
	return poll.Done(lost+notReady+extra == 0, "%d Books missing, %d not Ready for their generation or their ConfigMap not matching, %d extra",
		lost, notReady, extra)
}

// tally counts, over every namespace, the Books that should exist and do
// not (lost), those that are not Ready for their generation or whose
// ConfigMap does not hold their spec (notReady), and those that exist
// without the soak having created them (extra).
func (s *soak) tally(ctx context.Context) (lost, notReady, extra int, err error) {
	lost, notReady, extra, _, err = s.tallyGC(ctx)
	return lost, notReady, extra, err
}

// tallyGC is tally that also counts, among the Books not Ready, those
// waiting for the garbage collector to delete an earlier Book's ConfigMap
// (ConfigMapOfEarlierBook).
func (s *soak) tallyGC(ctx context.Context) (lost, notReady, extra, waitingGC int, err error) {
	s.mu.Lock()
	want := map[string]map[string]bool{}
	for ns, names := range s.want {
		want[ns] = copySet(names)
	}
	s.mu.Unlock()
	for i := range s.cfg.namespaces {
		ns := nsName(i)
		books, err := s.env.Books.WebappV2().Books(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, 0, 0, err
		}
		cms, err := s.env.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, 0, 0, err
		}
		byName := map[string]*corev1.ConfigMap{}
		for j := range cms.Items {
			byName[cms.Items[j].Name] = &cms.Items[j]
		}
		seen := map[string]bool{}
		for j := range books.Items {
			b := &books.Items[j]
			seen[b.Name] = true
			if !want[ns][b.Name] {
				extra++
				continue
			}
			cm := byName[b.Name]
			if !framework.IsReady(b) || cm == nil || !holdsSpec(cm, b) {
				notReady++
				if framework.ReadyAs(b, metav1.ConditionFalse, controller.ReasonConfigMapOfEarlierBook) {
					waitingGC++
				}
			}
		}
		for name := range want[ns] {
			if !seen[name] {
				lost++
			}
		}
	}
	return lost, notReady, extra, waitingGC, nil
}

func copySet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// holdsSpec reports whether cm is the Book's (its controller reference
// names the Book's UID) and holds exactly its title and price.
func holdsSpec(cm *corev1.ConfigMap, b *webappv2.Book) bool {
	ref := metav1.GetControllerOf(cm)
	return ref != nil && ref.UID == b.UID && len(cm.Data) == 2 &&
		cm.Data[controller.TitleKey] == b.Spec.Title && cm.Data[controller.PriceKey] == strconv.Itoa(int(b.Spec.Price.WholeUnits()))
}

// write puts the samples in soak.csv, the faults in faults.csv and the
// run's marks (warm-up, end of churn) in meta.csv, for test/soak/chart.
func (s *soak) write(samples []Sample, churnEnd time.Duration, l Limits) error {
	if err := os.MkdirAll(s.cfg.out, 0o755); err != nil {
		return err
	}
	rows := [][]string{{"at_s", "slot", "gen", "started_s", "leader", "heap_inuse_bytes", "goroutines", "open_fds", "queue_depth"}}
	for _, x := range samples {
		rows = append(rows, []string{secs(x.At), x.Slot, strconv.Itoa(x.Gen), secs(x.Started), strconv.FormatBool(x.Leader),
			num(x.Heap), num(x.Goroutines), num(x.FDs), num(x.Depth)})
	}
	if err := writeCSV(filepath.Join(s.cfg.out, "soak.csv"), rows); err != nil {
		return err
	}
	rows = [][]string{{"kind", "at_s", "end_s"}}
	s.mu.Lock()
	for _, f := range s.faults {
		rows = append(rows, []string{f.Kind, secs(f.At), secs(f.End)})
	}
	s.mu.Unlock()
	if err := writeCSV(filepath.Join(s.cfg.out, "faults.csv"), rows); err != nil {
		return err
	}
	return writeCSV(filepath.Join(s.cfg.out, "meta.csv"), [][]string{{"key", "value"},
		{"warmup_s", secs(l.Warmup)}, {"churn_end_s", secs(churnEnd)}, {"books", strconv.Itoa(s.cfg.books)},
		{"duration", s.cfg.duration.String()}})
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) }
func num(f float64) string        { return strconv.FormatFloat(f, 'f', -1, 64) }

func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		f.Close()
		return err
	}
	return errors.Join(f.Close(), checkRows(rows))
}

// checkRows refuses rows of differing widths, which the chart would
// misread.
func checkRows(rows [][]string) error {
	for i, r := range rows {
		if len(r) != len(rows[0]) {
			return fmt.Errorf("row %d has %d fields, the header %d: %s", i, len(r), len(rows[0]), strings.Join(r, ","))
		}
	}
	return nil
}
