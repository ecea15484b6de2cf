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

package binary_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/test/integration/framework"
)

const leaseID = "book-controller"

// exitSlack is what the issue allows a replica between losing its Lease and
// exiting, on top of the renew deadline.
const exitSlack = 2 * time.Second

// TestLeaderElection runs pairs of controller processes with leader
// election through the ways leadership ends: a SIGKILLed leader, a Lease
// taken from the leader, a partitioned leader, a SIGTERM as a standby takes
// over, and a SIGTERM whose drain loses the Lease. Who wrote what, and when,
// comes from the API server's audit log; each replica's user agent names it.
// The scenarios run in parallel, each in a namespace and with a Lease of
// its own.
func TestLeaderElection(t *testing.T) {
	if err := framework.InstallCRD(context.Background(), env.Extensions); err != nil {
		t.Fatal(err)
	}
	t.Run("SIGKILLed leader", func(t *testing.T) { t.Parallel(); testLeaderKilled(t) })
	t.Run("Lease taken", func(t *testing.T) { t.Parallel(); testLeaseTaken(t) })
	t.Run("partition", func(t *testing.T) { t.Parallel(); testPartition(t) })
	t.Run("SIGTERM during takeover", func(t *testing.T) { t.Parallel(); testSIGTERMDuringTakeover(t) })
	t.Run("SIGTERM during a drain that loses the Lease", func(t *testing.T) { t.Parallel(); testDrainLosesLease(t) })
}

// pair starts two replicas and returns them leader first.
func pair(t *testing.T, ns string, opts framework.ReplicaOptions) (leader, standby *framework.Replica) {
	t.Helper()
	opts.Namespace, opts.LeaseID = ns, leaseID
	a := env.StartReplica(t, binary, "replica-a", opts)
	b := env.StartReplica(t, binary, "replica-b", opts)
	leader = env.WaitForLeaseHolder(t, ns, leaseID, a, b)
	if leader == a {
		return a, b
	}
	return b, a
}

// createBooks creates n Books named prefix-i.
func createBooks(t *testing.T, ns, prefix string, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%02d", prefix, i)
		if _, err := env.Books.WebappV1().Books(ns).Create(context.Background(), framework.NewBook(ns, names[i], "t", int32(i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

func waitReady(t *testing.T, ns string, names []string) {
	t.Helper()
	for _, name := range names {
		env.WaitForReady(t, ns, name, metav1.ConditionTrue, "ConfigMapReady")
	}
}

// expectLossExit waits for r to exit after losing its Lease at lostAt, and
// checks that it did so within the renew deadline plus two seconds, with
// exit code 1 and a last line that says why (containing why).
func expectLossExit(t *testing.T, r *framework.Replica, lostAt time.Time, why string) time.Duration {
	t.Helper()
	limit := framework.TestLeaderTimings.RenewDeadline + exitSlack
	code, err := r.Wait(time.Until(lostAt.Add(limit)) + 10*time.Second) // the check below is the bound
	if err != nil {
		t.Fatalf("%s still runs %v after losing its Lease", r.Name, limit+10*time.Second)
	}
	took := r.ExitedAt().Sub(lostAt)
	t.Logf("%s exited %v after losing its Lease; its last lines:\n%s", r.Name, took.Round(time.Millisecond), r.Tail(6))
	if took > limit {
		t.Errorf("%s exited %v after losing its Lease, want within %v", r.Name, took.Round(time.Millisecond), limit)
	}
	if code != 1 {
		t.Errorf("%s exited with code %d after losing its Lease, want 1", r.Name, code)
	}
	lines := strings.Split(strings.TrimSpace(r.Output()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "book-controller: error: lost leader election") || !strings.Contains(last, why) {
		t.Errorf("%s's last line is %q, want the reason it exited (lost leader election, %s)", r.Name, last, why)
	}
	return took
}

// testLeaderKilled: the standby takes over within the lease duration plus
// 5 s of the leader's SIGKILL (no chance to release), and converges the
// Books created meanwhile; before, it wrote nothing.
func testLeaderKilled(t *testing.T) {
	ns := env.Namespace(t)
	leader, standby := pair(t, ns, framework.ReplicaOptions{})
	waitReady(t, ns, createBooks(t, ns, "before", 3))
	if v := metric(t, standby, "book_controller_reconcile_total"); v != 0 {
		t.Fatalf("the standby reconciled %v times while the leader was alive", v)
	}
	if v := metric(t, standby, "leader_election_master_status"); v != 0 {
		t.Fatalf("both replicas report leading")
	}

	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt := leader.KilledAt()
	after := createBooks(t, ns, "after", 3)
	waitReady(t, ns, after)
	if v := metric(t, standby, "leader_election_master_status"); v != 1 {
		t.Errorf("the new leader reports leader_election_master_status %v", v)
	}
	r := env.CheckLeadership(t, ns, leaseID, framework.TestLeaderTimings.RenewDeadline, false)
	expectTakeover(t, r, killedAt, "the kill", leader, standby)
}

// expectTakeover: the audit log shows standby's leadership as the first
// after old's, beginning within the lease duration plus 5 s of lostAt.
func expectTakeover(t *testing.T, r *framework.LeadershipReport, lostAt time.Time, what string, old, standby *framework.Replica) {
	t.Helper()
	next, ok := r.FirstLeadershipAfter(lostAt, old.Identity)
	if !ok || next.Holder != standby.Identity {
		t.Fatalf("the audit log shows no takeover by %s after %s", standby.Identity, what)
	}
	if took, limit := next.From.Sub(lostAt), framework.TestLeaderTimings.LeaseDuration+5*time.Second; took > limit {
		t.Errorf("takeover took %v after %s, want within %v", took, what, limit)
	}
}

// testLeaseTaken: the Lease is given to the standby in the middle of a
// burst, as a partitioned leader finds it. The old leader stops and exits
// within the renew deadline plus 2 s; the new one converges every Book.
func testLeaseTaken(t *testing.T) {
	ns := env.Namespace(t)
	leader, standby := pair(t, ns, framework.ReplicaOptions{})
	before := createBooks(t, ns, "before", 20)
	takenAt := env.TakeLease(t, ns, leaseID, standby.Identity)
	during := createBooks(t, ns, "during", 20)

	took := expectLossExit(t, leader, takenAt, fmt.Sprintf("held by %q", standby.Identity))
	waitReady(t, ns, append(before, during...))
	r := env.CheckLeadership(t, ns, leaseID, framework.TestLeaderTimings.RenewDeadline, true)
	t.Logf("the old leader exited %v after the take; %d of its writes came after the take, before it noticed", took.Round(time.Millisecond), len(r.Stale))
}

// testPartition: the leader's connection to the API server black-holes
// (accepted, never answered, never closed) for longer than the lease. The
// leader stops writing at its renew deadline and exits; the standby takes
// over within the lease duration plus 5 s; after the heal, the old leader
// writes nothing.
func testPartition(t *testing.T) {
	ns := env.Namespace(t)
	leader, standby := pair(t, ns, framework.ReplicaOptions{ViaProxy: true})
	before := createBooks(t, ns, "before", 10)
	waitReady(t, ns, before)

	cutAt := time.Now()
	leader.Proxy.BlackHole()
	during := createBooks(t, ns, "during", 10)
	expectLossExit(t, leader, cutAt, "not renewed within the 3s renew deadline")
	waitReady(t, ns, during)
	time.Sleep(time.Until(cutAt.Add(8 * time.Second)))
	healedAt := time.Now()
	leader.Proxy.Pass()
	time.Sleep(time.Second)

	r := env.CheckLeadership(t, ns, leaseID, framework.TestLeaderTimings.RenewDeadline, false)
	expectTakeover(t, r, cutAt, "the partition began", leader, standby)
	// Writes already past the proxy when it was cut land a few
	// milliseconds later; after the heal, nothing of the old leader may.
	for _, w := range r.Writes {
		if w.Writer == leader.Identity && w.At.After(healedAt) {
			t.Errorf("the partitioned leader's write reached the API server after the heal at %s: %s", healedAt.Format("15:04:05.000"), w)
		}
	}
}

// testSIGTERMDuringTakeover: the standby is told to stop just as it takes
// over a queue full of work. Whether or not its workers started, it writes
// only while it holds the Lease, releases it, and exits 0.
func testSIGTERMDuringTakeover(t *testing.T) {
	ns := env.Namespace(t)
	leader, standby := pair(t, ns, framework.ReplicaOptions{})
	waitReady(t, ns, createBooks(t, ns, "before", 3))
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	createBooks(t, ns, "queued", 30)

	framework.Eventually(t, standby.Name+" to take the Lease", env.LeaseHeldBy(ns, leaseID, standby.Identity))
	if err := standby.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, err := standby.Wait(40 * time.Second) // a drain is bounded by 20 s
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Errorf("%s exited with code %d after SIGTERM, want 0", standby.Name, code)
	}
	r := env.CheckLeadership(t, ns, leaseID, framework.TestLeaderTimings.RenewDeadline, false)
	last, ok := r.LastLeadershipOf(standby.Identity, time.Now())
	if !ok || !last.Released {
		t.Errorf("%s did not release the Lease after SIGTERM: %v", standby.Name, r.Periods)
	}
}

// testDrainLosesLease: SIGTERM starts a drain of a long queue (one worker,
// every request of the leader slowed down by its proxy); then its
// connection black-holes, so it can no longer renew. The fence ends the
// drain at the renew deadline: the leader exits 1 within the renew deadline
// plus 2 s of its last renewal, having written nothing after it.
func testDrainLosesLease(t *testing.T) {
	ns := env.Namespace(t)
	leader, _ := pair(t, ns, framework.ReplicaOptions{ViaProxy: true, Args: []string{"--workers", "1"}})
	leader.Proxy.Latency(300 * time.Millisecond)
	createBooks(t, ns, "queued", 40)
	if err := leader.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if !leader.Running() {
		t.Fatalf("%s exited at once on SIGTERM with 40 Books queued; want a drain:\n%s", leader.Name, leader.Tail(20))
	}
	cutAt := time.Now()
	leader.Proxy.BlackHole()
	expectLossExit(t, leader, cutAt, "not renewed within")
	env.CheckLeadership(t, ns, leaseID, framework.TestLeaderTimings.RenewDeadline, false)
}

// metric reads one value from the replica's /metrics; -1 if unreachable.
func metric(t *testing.T, r *framework.Replica, name string, labels ...string) float64 {
	code, _, err := framework.HTTPGet(r.MetricsAddr, "/metrics")
	if err != nil || code != 200 {
		return -1
	}
	v, err := framework.MetricValue(framework.Scrape(t, r.MetricsAddr), name, labels...)
	if err != nil {
		return -1
	}
	return v
}
