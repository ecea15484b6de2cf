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
	"context"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/test/integration/framework"
)

// etcd out of space: etcd with a quota of 32 MiB, filled by revisions of
// one ConfigMap of 900 KiB until it raises its NOSPACE alarm.
const (
	noSpaceQuota   = 32 << 20
	noSpaceFill    = 900 << 10
	noSpaceBooks   = 200 // converged before the fill
	noSpaceDeleted = 50  // of their ConfigMaps deleted while etcd is full
	noSpaceAfter   = 20  // Books created after the recovery
	// noSpaceOutage is how long etcd stays full: short, since a key that
	// failed all along waits up to about as long again for its next retry.
	noSpaceOutage = 20 * time.Second
	// controllerBaseDelay is the per-key backoff's first delay
	// (controller.Options.RateLimiter's default: 5ms doubling).
	controllerBaseDelay = 5 * time.Millisecond
	// spaceExceeded is etcd's error, which the API server passes on.
	spaceExceeded = "database space exceeded"
)

// TestEtcdNoSpace runs a control plane of its own whose etcd has a quota of
// 32 MiB. With the controller running and 200 Books Ready, a stream of Book
// creates starts and a ConfigMap in another namespace is rewritten with 900
// KiB until etcd raises its NOSPACE alarm and the API server refuses every
// write ("database space exceeded"). While etcd is full (20s), 50 of the
// Books' ConfigMaps are deleted (deletes need no space), so the controller
// has ConfigMaps to create and every create fails: the audit log must show
// each Book's writes spaced by the per-key backoff, not a loop. Then the
// operator's recovery: compact to the current revision, defragment, disarm
// the alarm. Every Book the API server accepted, before, during or after,
// ends Ready with exactly one ConfigMap. So does any Book whose create was
// answered "database space exceeded" and exists all the same: etcd applies
// the write that crosses its quota, then answers it with NOSPACE and raises
// the alarm, so that answer does not mean the Book was not stored.
func TestEtcdNoSpace(t *testing.T) {
	ctx := context.Background()
	e := ownControlPlane(t, nil, []string{"--quota-backend-bytes=" + strconv.Itoa(noSpaceQuota)})
	etcdURL := e.Cluster.EtcdURL()
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdURL}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("connecting to etcd at %s: %v", etcdURL, err)
	}
	t.Cleanup(func() { _ = etcd.Close() })
	dbSize := func() int64 {
		t.Helper()
		st, err := etcd.Status(ctx, etcdURL)
		if err != nil {
			t.Fatalf("etcd status: %v", err)
		}
		return st.DbSize
	}
	startSize := dbSize()

	ns, fillNS := e.Namespace(t), e.Namespace(t)
	metricsAddr := framework.FreeAddr(t)
	e.StartController(t, framework.ControllerOptions{Namespace: ns, MetricsAddr: metricsAddr, ConflictRecheck: 5 * time.Second})
	waitMetricsUp(t, metricsAddr)
	want := createBooksIn(t, e, ns, "book", noSpaceBooks)
	waitConvergedIn(t, e, ns, expectation{want: want})

	// Books created from now until the recovery, one at a time by each of
	// two creators, none retried: what the API server said of each.
	creates := &createLog{accepted: map[string]spec{}, refused: map[string]spec{}, unknown: map[string]spec{}}
	stopCreating := make(chan struct{})
	var creators sync.WaitGroup
	var seq atomic.Int64
	for range 2 {
		creators.Go(func() {
			for {
				select {
				case <-stopCreating:
					return
				case <-time.After(100 * time.Millisecond):
				}
				i := int(seq.Add(1))
				name := bookName("during", i)
				s := spec{title: "Title of " + name, price: int32(i)}
				cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				_, err := e.Books.WebappV2().Books(ns).Create(cctx, framework.NewBook(ns, name, s.title, s.price), metav1.CreateOptions{})
				cancel()
				creates.record(name, s, err)
			}
		})
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			close(stopCreating)
			creators.Wait()
		}
	}
	t.Cleanup(stop)

	fillStart := time.Now()
	rewrites := fill(t, e, fillNS)
	full := time.Now()
	retries0 := metricValue(t, metricsAddr, "workqueue_retries_total", "name", controller.Name)
	errors0 := metricValue(t, metricsAddr, "book_controller_reconcile_errors_total", "controller", controller.Name)
	alarms, err := etcd.AlarmList(ctx)
	if err != nil {
		t.Fatalf("listing etcd's alarms: %v", err)
	}
	var raised []string
	for _, a := range alarms.Alarms {
		raised = append(raised, a.Alarm.String())
	}
	if !slices.Contains(raised, "NOSPACE") {
		t.Fatalf("the API server refused a write with %q, but etcd's alarms are %v", spaceExceeded, raised)
	}
	fullSize := dbSize()
	faults.Add(1)
	t.Logf("etcd full (alarms %v, database %.1f MiB of a %d MiB quota) after %d rewrites of the %d KiB ConfigMap in %v",
		raised, mib(fullSize), noSpaceQuota>>20, rewrites, noSpaceFill>>10, full.Sub(fillStart).Round(100*time.Millisecond))

	// Deletes need no space: the controller now has ConfigMaps to create.
	deleted := 0
	for i := range noSpaceDeleted {
		err := e.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, bookName("book", i), metav1.DeleteOptions{})
		switch {
		case err == nil:
			deleted++
		case !apierrors.IsNotFound(err):
			t.Logf("deleting ConfigMap %s while etcd is full: %v", bookName("book", i), err)
		}
	}
	time.Sleep(time.Until(full.Add(noSpaceOutage)))
	retries := metricValue(t, metricsAddr, "workqueue_retries_total", "name", controller.Name) - retries0
	reconcileErrors := metricValue(t, metricsAddr, "book_controller_reconcile_errors_total", "controller", controller.Name) - errors0
	stop()

	// The operator's recovery.
	st, err := etcd.Status(ctx, etcdURL)
	if err != nil {
		t.Fatalf("etcd status: %v", err)
	}
	if _, err := etcd.Compact(ctx, st.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compacting etcd to revision %d: %v", st.Header.Revision, err)
	}
	if _, err := etcd.Defragment(ctx, etcdURL); err != nil {
		t.Fatalf("defragmenting etcd: %v", err)
	}
	defragSize := dbSize()
	if _, err := etcd.AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil { // all alarms
		t.Fatalf("disarming etcd's alarms: %v", err)
	}
	disarmed := time.Now()
	outage := disarmed.Sub(full)
	if alarms, err := etcd.AlarmList(ctx); err != nil || len(alarms.Alarms) > 0 {
		t.Fatalf("etcd's alarms after the disarm: %v (%v)", alarms, err)
	}
	t.Logf("compacted to revision %d, defragmented (%.1f MiB → %.1f MiB) and disarmed %v after etcd was full",
		st.Header.Revision, mib(fullSize), mib(defragSize), outage.Round(100*time.Millisecond))
	after := createBooksIn(t, e, ns, "after", noSpaceAfter)

	// Every Book the API server took must be there; none it refused may be.
	for name := range creates.unknown {
		_, err := e.Books.WebappV2().Books(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			creates.accepted[name] = creates.unknown[name]
		case !apierrors.IsNotFound(err):
			t.Fatalf("reading Book %s, whose create had no clear answer: %v", name, err)
		}
	}
	// etcd applies the write that crosses its quota and then answers it
	// with its NOSPACE error, raising the alarm: such a Book exists
	// although the API server answered its create with a 500.
	storedAnyway := 0
	for name, s := range creates.refused {
		_, err := e.Books.WebappV2().Books(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			storedAnyway++
			creates.accepted[name] = s
			t.Logf("Book %s exists although its create was answered %q: it crossed etcd's quota", name, spaceExceeded)
		case !apierrors.IsNotFound(err):
			t.Fatalf("reading Book %s: %v", name, err)
		}
	}
	maps.Copy(want, creates.accepted)
	maps.Copy(want, after)
	waitConvergedIn(t, e, ns, expectation{want: want})
	took := time.Since(disarmed)

	// What the controller sent while etcd was full.
	var writes, events []framework.AuditWrite
	for _, w := range writesBetween(framework.ControllerWrites(e.AuditLog(t), ns), full, disarmed) {
		if w.Resource == "events" {
			events = append(events, w)
		} else {
			writes = append(writes, w)
		}
	}
	perKey := map[string]int{}
	failed := 0
	for _, w := range writes {
		perKey[w.Resource+" "+w.Object]++
		if w.Code >= 500 {
			failed++
		}
	}
	most, mostKey := 0, ""
	for k, n := range perKey {
		if n > most {
			most, mostKey = n, k
		}
	}
	// Per-key backoff from 5ms, doubling: in a window W a key is tried at
	// most 1 + log2(W/5ms + 1) times; 3 more for events that queue it
	// afresh (its ConfigMap's deletion, a Book's creation).
	bound := 1 + int(math.Log2(outage.Seconds()/controllerBaseDelay.Seconds()+1)) + 3
	if failed == 0 {
		t.Errorf("the audit log shows no failed write of the controller in the %v etcd was full: the test exercised nothing (%d ConfigMaps deleted, %d Books accepted while filling)",
			outage.Round(100*time.Millisecond), deleted, len(creates.accepted))
	}
	if most > bound {
		t.Errorf("the controller wrote %s %d times in the %v etcd was full: more than the per-key backoff allows (%d)",
			mostKey, most, outage.Round(100*time.Millisecond), bound)
	}
	figure(t, "etcd quota %d MiB (%.1f MiB at start), full after %d rewrites of %d KiB; %d Books accepted and %d refused with NOSPACE (of which %d stored anyway) while filling and full, %d ConfigMaps deleted; in the %v full the controller wrote %d times to %d objects (%s; at most %d to one, bound %d; Events: %s), workqueue retries %v, reconcile errors %v; compact+defrag %.1f→%.1f MiB; all %d Books Ready %v after the disarm",
		noSpaceQuota>>20, mib(startSize), rewrites, noSpaceFill>>10, len(creates.accepted)-storedAnyway, len(creates.refused), storedAnyway, deleted,
		outage.Round(100*time.Millisecond), len(writes), len(perKey), describeCodes(writesByCode(writes)),
		most, bound, describeCodes(writesByCode(events)), retries, reconcileErrors, mib(fullSize), mib(defragSize), len(want), took.Round(100*time.Millisecond))
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// createLog is what the API server answered to each Book create.
type createLog struct {
	mu       sync.Mutex
	accepted map[string]spec
	refused  map[string]spec // "database space exceeded"
	unknown  map[string]spec // another error: maybe created, maybe not
}

func (l *createLog) record(name string, s spec, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.accepted[name] = s
	case strings.Contains(err.Error(), spaceExceeded):
		l.refused[name] = s
	default:
		l.unknown[name] = s
	}
}

// fill rewrites a ConfigMap of noSpaceFill bytes in namespace ns until the
// API server refuses the write with etcd's "database space exceeded", and
// returns how many rewrites it took. Each rewrite leaves a revision of the
// whole object in etcd until a compaction.
func fill(t *testing.T, e *framework.Env, ns string) int {
	t.Helper()
	ctx := context.Background()
	cms := e.Kube.CoreV1().ConfigMaps(ns)
	data := func(i int) map[string]string {
		return map[string]string{"fill": strings.Repeat(string(rune('a'+i%26)), noSpaceFill)}
	}
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "filler"}, Data: data(0)}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the ConfigMap that fills etcd: %v", err)
	}
	for i := 1; i <= 4*noSpaceQuota/noSpaceFill; i++ {
		cm.Data = data(i)
		next, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
		switch {
		case err == nil:
			cm = next
		case strings.Contains(err.Error(), spaceExceeded):
			return i - 1
		default:
			t.Fatalf("filling etcd, rewrite %d: %v", i, err)
		}
	}
	t.Fatalf("etcd still took writes after %d rewrites of %d bytes with a quota of %d", 4*noSpaceQuota/noSpaceFill, noSpaceFill, noSpaceQuota)
	return 0
}
