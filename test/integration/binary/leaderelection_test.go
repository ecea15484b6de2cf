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
	"syscall"
	"testing"
	"time"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/test/integration/framework"
)

const leaseID = "book-controller"

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

// createBooks creates n Books named prefix-00000 on (framework.CreateBooks).
func createBooks(t *testing.T, ns, prefix string, n int) []*webappv2.Book {
	t.Helper()
	return env.CreateBooks(t, ns, prefix, n)
}

// testLeaderKilled: the standby takes over within the lease duration plus
// framework.TakeoverSlack of the leader's SIGKILL (no chance to release),
// and converges the Books created meanwhile; before, it wrote nothing.
func testLeaderKilled(t *testing.T) {
	ns := env.Namespace(t)
	leader, standby := pair(t, ns, framework.ReplicaOptions{})
	createBooks(t, ns, "before", 3)
	env.WaitForBooksReady(t, ns, 3)
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
	createBooks(t, ns, "after", 3)
	env.WaitForBooksReady(t, ns, 6)
	if v := metric(t, standby, "leader_election_master_status"); v != 1 {
		t.Errorf("the new leader reports leader_election_master_status %v", v)
	}
	r := env.CheckLeadership(t, ns, leaseID, framework.TestLeaderTimings.RenewDeadline, false)
	expectTakeover(t, r, killedAt, "the kill", leader, standby)
}

// expectTakeover: the audit log shows standby's leadership as the first
// after old's, beginning within the lease duration plus
// framework.TakeoverSlack of lostAt.
func expectTakeover(t *testing.T, r *framework.LeadershipReport, lostAt time.Time, what string, old, standby *framework.Replica) {
	t.Helper()
	next, ok := r.FirstLeadershipAfter(lostAt, old.Identity)
	if !ok || next.Holder != standby.Identity {
		t.Fatalf("the audit log shows no takeover by %s after %s", standby.Identity, what)
	}
	framework.ExpectTakeover(t, "after "+what, lostAt, next.From, framework.TestLeaderTimings.LeaseDuration)
}

// testLeaseTaken: the Lease is given to the standby in the middle of a
// burst, as a partitioned leader finds it. The old leader stops and exits
// within framework.LeaseLossExitSlack; the new one converges every Book.
func testLeaseTaken(t *testing.T) {
	ns := env.Namespace(t)
	leader, standby := pair(t, ns, framework.ReplicaOptions{})
	createBooks(t, ns, "before", 20)
	takenAt := env.TakeLease(t, ns, leaseID, standby.Identity)
	createBooks(t, ns, "during", 20)

	took := leader.ExpectLossExit(t, takenAt, fmt.Sprintf("held by %q", standby.Identity))
	env.WaitForBooksReady(t, ns, 40)
	r := env.CheckLeadership(t, ns, leaseID, framework.TestLeaderTimings.RenewDeadline, true)
	t.Logf("the old leader exited %v after the take; %d of its writes came after the take, before it noticed", took.Round(time.Millisecond), len(r.Stale))
}

// testPartition: the leader's connection to the API server black-holes
// (accepted, never answered, never closed) for longer than the lease. The
// leader stops writing at its renew deadline and exits; the standby takes
// over within the lease duration plus framework.TakeoverSlack; after the
// heal, the old leader writes nothing.
func testPartition(t *testing.T) {
	ns := env.Namespace(t)
	leader, standby := pair(t, ns, framework.ReplicaOptions{ViaProxy: true})
	createBooks(t, ns, "before", 10)
	env.WaitForBooksReady(t, ns, 10)

	cutAt := time.Now()
	leader.Proxy.BlackHole()
	createBooks(t, ns, "during", 10)
	// Lost at the renew deadline after its last renewal before the cut.
	if _, err := leader.Wait(framework.Timeout); err != nil {
		t.Fatal(err)
	}
	lostAt := env.LeaseLoss(t, ns, leaseID, framework.TestLeaderTimings.RenewDeadline, leader.Identity, cutAt)
	leader.ExpectLossExit(t, lostAt, "not renewed within the 3s renew deadline")
	env.WaitForBooksReady(t, ns, 20)
	// The partition lasts longer than the lease, as the scenario says.
	time.Sleep(time.Until(cutAt.Add(8 * time.Second)))
	healedAt := time.Now()
	leader.Proxy.Pass()
	// A request through the healed proxy is recorded before the audit log
	// is read: had anything of the old leader been held in it, it would
	// have come through by then.
	env.ThroughProxy(t, leader.Proxy)

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
	createBooks(t, ns, "before", 3)
	env.WaitForBooksReady(t, ns, 3)
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
// drain at the renew deadline: the leader exits 1 within
// framework.LeaseLossExitSlack of it, having written nothing after it.
func testDrainLosesLease(t *testing.T) {
	ns := env.Namespace(t)
	const latency = 300 * time.Millisecond
	leader, _ := pair(t, ns, framework.ReplicaOptions{ViaProxy: true, Args: []string{"--workers", "1"}})
	leader.Proxy.Latency(latency)
	createBooks(t, ns, "queued", 40)
	signalled := time.Now()
	if err := leader.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// A drain, not an exit at once: a write that reached the API server
	// more than the proxy's latency after the SIGTERM was sent after it.
	env.WaitForWriteAfter(t, ns, leader.Identity, signalled.Add(latency), leader.Process)
	cutAt := time.Now()
	leader.Proxy.BlackHole()
	if _, err := leader.Wait(framework.Timeout); err != nil {
		t.Fatal(err)
	}
	lostAt := env.LeaseLoss(t, ns, leaseID, framework.TestLeaderTimings.RenewDeadline, leader.Identity, cutAt)
	leader.ExpectLossExit(t, lostAt, "not renewed within")
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
