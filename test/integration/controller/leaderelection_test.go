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

package controller_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/rest"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/manager"
	"ydzs.io/book-controller/test/integration/framework"
)

// leaseNamespace is where the deployment's Role lets the controller's
// ServiceAccount hold Leases.
const leaseNamespace = "book-controller-system"

// Short lease timings keep the test quick; the production defaults are
// 15s/10s/2s. Each test gets its own Lease, named after its namespace.
func testLeaderElection(ns, identity string) manager.LeaderElection {
	return manager.LeaderElection{
		Enabled: true, Namespace: leaseNamespace, ID: ns, Identity: identity,
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
	}
}

// TestLeaderElectionOnlyLeaderWorksAndStandbyTakesOver runs two replicas.
// Only the holder of the Lease may write Books' objects; when it is stopped,
// it releases the Lease after its last write and the standby takes over at
// once. Who wrote what, and when, comes from the API server's audit log.
func TestLeaderElectionOnlyLeaderWorksAndStandbyTakesOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)

	probeA, probeB := framework.FreeAddr(t), framework.FreeAddr(t)
	a := env.StartController(t, framework.ControllerOptions{
		Namespace: ns, LeaderElection: testLeaderElection(ns, "replica-a"), ProbeAddr: probeA,
	})
	// Let A take the Lease first, so the roles are known.
	framework.Eventually(t, "replica-a to hold the Lease", env.LeaseHeldBy(leaseNamespace, ns, "replica-a"))
	env.StartController(t, framework.ControllerOptions{
		Namespace: ns, LeaderElection: testLeaderElection(ns, "replica-b"), ProbeAddr: probeB,
	})

	for i := range 5 {
		name := fmt.Sprintf("le-%d", i)
		if _, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, name, "t", int32(i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitForReady(t, ns, name, metav1.ConditionTrue, "ConfigMapReady")
	}
	// The standby is warm and ready, but has written nothing.
	framework.Eventually(t, "the standby to be ready", framework.AnswersOK(probeB, "/readyz"))
	events := env.AuditLog(t)
	if w := writesBy(events, ns, "replica-b"); len(w) != 0 {
		t.Fatalf("the standby wrote %d times while the leader worked: %v", len(w), w)
	}
	if len(writesBy(events, ns, "replica-a")) == 0 {
		t.Fatalf("the leader wrote nothing")
	}

	// Graceful stop: the leader drains, releases the Lease, and the standby
	// takes over without waiting for the lease to expire.
	stoppedAt := time.Now()
	if err := a.Stop(); err != nil {
		t.Fatalf("leader stopped with %v", err)
	}
	framework.Eventually(t, "replica-b to take the Lease", env.LeaseHeldBy(leaseNamespace, ns, "replica-b"))
	t.Logf("replica-b took the Lease %v after replica-a was told to stop", time.Since(stoppedAt).Round(time.Millisecond))
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, "after", "t", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "after", metav1.ConditionTrue, "ConfigMapReady")

	events = env.AuditLog(t)
	r := checkLeadership(t, events, ns)
	if len(r.Periods) != 2 || r.Periods[0].Holder != "replica-a" || !r.Periods[0].Released || r.Periods[1].Holder != "replica-b" {
		t.Fatalf("leadership periods %v, want replica-a's (released) then replica-b's", r.Periods)
	}
	// Without the release, replica-b could have acquired only once the
	// lease had expired: a lease duration after replica-a's last renewal.
	if expiry := r.Periods[0].LastRenew.Add(testLeaderElection(ns, "").LeaseDuration); !r.Periods[1].From.Before(expiry) {
		t.Errorf("replica-b acquired at %s, not before the released lease would have expired (%s): the release was of no use",
			r.Periods[1].From.Format("15:04:05.000"), expiry.Format("15:04:05.000"))
	}
	if len(writesBy(events, ns, "replica-b")) == 0 {
		t.Fatalf("the new leader wrote nothing")
	}
}

// TestGracefulStopReleasesAndLeavesNothing: a leader asked to stop drains,
// releases the Lease after its last write, returns nil, and leaves no
// goroutine behind. Not parallel: goleak looks at the whole test binary.
func TestGracefulStopReleasesAndLeavesNothing(t *testing.T) {
	ns := env.Namespace(t)
	saConfig := env.ControllerServiceAccountConfig(t)
	ignore := goleak.IgnoreCurrent()
	a := env.StartController(t, framework.ControllerOptions{Namespace: ns,
		LeaderElection: testLeaderElection(ns, "replica-a"), RESTConfig: saConfig})
	framework.Eventually(t, "replica-a to hold the Lease", env.LeaseHeldBy(leaseNamespace, ns, "replica-a"))
	env.CreateBooks(t, ns, "book", 20)
	if err := a.Stop(); err != nil {
		t.Fatalf("Run after a graceful stop: %v, want nil", err)
	}
	if h := env.LeaseHolder(context.Background(), leaseNamespace, ns); h != "" {
		t.Errorf("the Lease is held by %q after the leader stopped, want released", h)
	}
	r := checkLeadership(t, env.AuditLog(t), ns)
	if len(r.Periods) != 1 || !r.Periods[0].Released {
		t.Errorf("leadership periods %v, want one, ended by a release", r.Periods)
	}
	goleak.VerifyNone(t, ignore)
}

// TestLeaseTakenLeaderStopsWritingAndReturns takes the Lease from a leader
// the way a partitioned leader loses it (the other replica now holds it),
// in a burst of work. The leader must stop writing, and Run return
// ErrLeaderElectionLost, within framework.LeaseLossExitSlack of the take,
// leaving no goroutine behind. Not parallel: goleak compares the goroutines
// of the whole test binary.
func TestLeaseTakenLeaderStopsWritingAndReturns(t *testing.T) {
	ns := env.Namespace(t)
	saConfig := env.ControllerServiceAccountConfig(t)
	le := testLeaderElection(ns, "replica-a")
	ignore := goleak.IgnoreCurrent()

	a := env.StartController(t, framework.ControllerOptions{Namespace: ns, LeaderElection: le, RESTConfig: saConfig})
	framework.Eventually(t, "replica-a to hold the Lease", env.LeaseHeldBy(leaseNamespace, ns, "replica-a"))
	created := make(chan error, 1)
	go func() {
		var err error
		for i := range 300 {
			name := fmt.Sprintf("book-%04d", i)
			if _, e := env.Books.WebappV2().Books(ns).Create(context.Background(), framework.NewBook(ns, name, "t", 1), metav1.CreateOptions{}); e != nil && err == nil {
				err = e
			}
		}
		created <- err
	}()
	creating := sync.OnceValue(func() error { return <-created })
	defer func() {
		if err := creating(); err != nil {
			t.Errorf("creating Books: %v", err)
		}
	}()
	framework.Eventually(t, "replica-a to be writing", func(ctx context.Context) error {
		cms, err := env.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		return poll.Done(len(cms.Items) >= 20, "%d ConfigMaps", len(cms.Items))
	})

	takenAt := env.TakeLease(t, leaseNamespace, ns, "replica-b")
	exitedAfter := framework.ExpectStopAfterLeaseLoss(t, "manager.Run", takenAt, a.Exited(), a.ExitedAt)
	if err := a.Err(); !errors.Is(err, manager.ErrLeaderElectionLost) || !strings.Contains(err.Error(), `held by "replica-b"`) {
		t.Errorf("manager.Run returned %v, want ErrLeaderElectionLost naming the new holder", err)
	}
	events := env.AuditLog(t)
	r := checkLeadership(t, events, ns)
	last := writesBy(events, ns, "replica-a")
	t.Logf("Run returned %v after the Lease was taken; %d writes of which %d after the take (stale, before the leader noticed)",
		exitedAfter.Round(time.Millisecond), len(last), len(r.Stale))
	if n := len(last); n > 0 && last[n-1].At.After(takenAt.Add(framework.LeaseLossExitSlack)) {
		// The leader learns of the take at its next renewal, a retry
		// period later; it stops writing before it stops.
		t.Errorf("replica-a wrote %v after the Lease was taken, later than it may stop (framework.LeaseLossExitSlack, %v): %v",
			last[n-1].At.Sub(takenAt), framework.LeaseLossExitSlack, last[n-1])
	}
	// The goroutine creating Books is the test's own, and may still be at
	// it on a loaded machine: it must end before goroutines are counted.
	creating()
	goleak.VerifyNone(t, ignore)
}

// TestLeaseLostDuringDrainCutsItShort: SIGTERM starts a drain of a long
// queue (one worker, each ConfigMap create answered after half a second);
// then the Lease can no longer be renewed. The fence must end the drain at
// the renew deadline, not at the 20 s drain timeout: Run returns within
// framework.LeaseLossExitSlack of it, nothing is written after it, and Run
// reports the loss.
func TestLeaseLostDuringDrainCutsItShort(t *testing.T) {
	const books = 30
	ns := env.Namespace(t)
	le := testLeaderElection(ns, "replica-a")
	var failLeases atomic.Bool
	// creates records when each ConfigMap create was sent.
	var mu sync.Mutex
	var creates []time.Time
	createsSince := func(at time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		return countWith(creates, func(c time.Time) bool { return !c.Before(at) })
	}
	cfg := env.ControllerServiceAccountConfig(t)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if failLeases.Load() && strings.Contains(req.URL.Path, "/leases/") {
				return nil, errors.New("renewal failed by the test")
			}
			if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/namespaces/"+ns+"/configmaps") {
				mu.Lock()
				creates = append(creates, time.Now())
				mu.Unlock()
				select {
				case <-time.After(500 * time.Millisecond): // a slow API server
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			return rt.RoundTrip(req)
		})
	})
	ignore := goleak.IgnoreCurrent()
	a := env.StartController(t, framework.ControllerOptions{Namespace: ns, LeaderElection: le, RESTConfig: cfg, Workers: 1})
	framework.Eventually(t, "replica-a to hold the Lease", env.LeaseHeldBy(leaseNamespace, ns, "replica-a"))
	env.CreateBooks(t, ns, "book", books)
	framework.Eventually(t, "the controller to try to create a ConfigMap", func(context.Context) error {
		return poll.Done(createsSince(time.Time{}) > 0, "no create yet")
	})

	stopAsked := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- a.Stop() }() // SIGTERM: a drain of some 15 s begins
	// A drain, not a return at once: the one worker goes on to further
	// Books. Two creates sent after the stop was asked for, each held half
	// a second, leave no doubt that the second came after Run was told.
	framework.Eventually(t, "two ConfigMap creates sent after the stop was asked for", func(context.Context) error {
		select {
		case err := <-stopped:
			t.Fatalf("Run returned (%v) with %d Books to sync; want a drain", err, books)
		default:
		}
		n := createsSince(stopAsked)
		return poll.Done(n >= 2, "%d so far", n)
	})
	failingFrom := time.Now()
	failLeases.Store(true)
	var err error
	select {
	case err = <-stopped:
	case <-time.After(framework.Timeout):
		t.Fatalf("the drain went on %v after renewals began to fail", framework.Timeout)
	}
	if !errors.Is(err, manager.ErrLeaderElectionLost) {
		t.Errorf("Run returned %v, want ErrLeaderElectionLost", err)
	}
	// Lost at the renew deadline after the last renewal before the
	// failures began.
	lostAt := env.LeaseLoss(t, leaseNamespace, ns, le.RenewDeadline, "replica-a", failingFrom)
	framework.ExpectStopAfterLeaseLoss(t, "the draining manager.Run", lostAt, a.Exited(), a.ExitedAt)
	events := env.AuditLog(t)
	r := checkLeadership(t, events, ns)
	written := writesBy(events, ns, "replica-a")
	t.Logf("%d writes in all, the last %v before the end of leadership", len(written), r.MinSlack)
	if len(written) == 0 {
		t.Error("replica-a wrote nothing: the test held its writes too long to show anything")
	}
	goleak.VerifyNone(t, ignore)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// writesBy returns the writes of Books, ConfigMaps and Events in ns that the
// audit log attributes to the replica identity.
func writesBy(events []auditv1.Event, ns, identity string) []framework.AuditWrite {
	var out []framework.AuditWrite
	for _, w := range framework.ControllerWrites(events, ns) {
		if w.Writer == identity {
			out = append(out, w)
		}
	}
	return out
}

// checkLeadership derives the leadership periods on the test's Lease from
// the audit log and fails the test on any write outside its writer's
// period or any overlap of periods (other than after a forced take).
func checkLeadership(t *testing.T, events []auditv1.Event, ns string) *framework.LeadershipReport {
	t.Helper()
	r, err := framework.Leaderships(events, leaseNamespace, ns, ns, testLeaderElection(ns, "").RenewDeadline)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Periods {
		t.Logf("leadership: %s", p)
	}
	for _, w := range r.Outside {
		t.Errorf("a write outside its writer's leadership (after its last renewal plus the renew deadline, or before it led): %s", w)
	}
	if len(r.Stale) == 0 {
		for _, o := range r.Overlaps {
			t.Errorf("two leaders at once: %s", o)
		}
	}
	return r
}

// TestLeaseThatCannotBeHeldFailsAtStart: a Lease namespace that does not
// exist, or one where the controller's Role is not bound, would leave the
// replica retrying for ever. It must stop at once with an error that names
// the namespace and the fix, having written nothing.
func TestLeaseThatCannotBeHeldFailsAtStart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		cfg       *rest.Config
		namespace string
		want      string
	}{
		{"namespace missing", env.RESTConfig(), "no-such-namespace",
			`--leader-elect-namespace "no-such-namespace" does not exist`},
		{"no Role bound there", env.ControllerServiceAccountConfig(t), env.Namespace(t),
			`not allowed to hold the Lease`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			le := testLeaderElection("lease-check", "replica")
			le.Namespace = tc.namespace
			ctx, cancel := context.WithTimeout(context.Background(), framework.Timeout)
			defer cancel()
			err := manager.Run(ctx, manager.Config{RESTConfig: tc.cfg, Workers: 1,
				LeaderElection: le, MetricsAddr: "0", ProbeAddr: "0"})
			if ctx.Err() != nil {
				t.Fatal("manager.Run kept retrying instead of failing")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("manager.Run: got %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans several lines: %q", err)
			}
			if _, err := env.Kube.CoordinationV1().Leases(tc.namespace).Get(ctx, "lease-check", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("a Lease lease-check exists in %s after the check (err %v)", tc.namespace, err)
			}
		})
	}
}
