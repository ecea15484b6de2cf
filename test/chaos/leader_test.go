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
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/test/integration/framework"
)

// The leader-election tests run replicas of the controller binary with
// framework.TestLeaderTimings (lease 4 s, renew deadline 3 s, retry 500 ms)
// and judge them from the API server's audit log only: each replica's user
// agent carries its identity, the Lease writes (recorded with their body)
// give each replica's leadership periods, and every write to a Book, a
// ConfigMap or an Event must fall inside its writer's period.
const chaosLease = "book-controller-chaos"

var timings = framework.TestLeaderTimings

// slot is one replica of a Deployment: the process currently running, and
// the proxy every process of the slot goes through (if any), so that a
// restarted replica meets the same network.
type slot struct {
	name    string
	ns      string
	proxy   *framework.Proxy
	args    []string
	timings framework.LeaderTimings

	mu       sync.Mutex
	current  *framework.Replica
	previous []*framework.Replica
	starts   int
}

func newSlot(t *testing.T, name, ns string, viaProxy bool, args ...string) *slot {
	return newSlotWith(t, name, ns, viaProxy, timings, args...)
}

func newSlotWith(t *testing.T, name, ns string, viaProxy bool, lt framework.LeaderTimings, args ...string) *slot {
	s := &slot{name: name, ns: ns, args: args, timings: lt}
	if viaProxy {
		u := env.Cluster.RESTConfig().Host
		s.proxy = framework.StartProxy(t, u[len("https://"):])
	}
	s.start(t)
	return s
}

// start runs a new process in the slot, as a Deployment replaces a pod.
func (s *slot) start(t *testing.T) *framework.Replica {
	s.mu.Lock()
	s.starts++
	name := fmt.Sprintf("%s-%d", s.name, s.starts)
	s.mu.Unlock()
	r := env.StartReplica(t, binary, name, framework.ReplicaOptions{Namespace: s.ns, LeaseID: chaosLease,
		Proxy: s.proxy, Timings: s.timings, Args: append([]string{"-v=2"}, s.args...)})
	s.mu.Lock()
	if s.current != nil {
		s.previous = append(s.previous, s.current)
	}
	s.current = r
	s.mu.Unlock()
	return r
}

func (s *slot) replica() *framework.Replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

// replicas are every process the slots ran.
func replicas(slots ...*slot) []*framework.Replica {
	var out []*framework.Replica
	for _, s := range slots {
		s.mu.Lock()
		out = append(out, s.previous...)
		out = append(out, s.current)
		s.mu.Unlock()
	}
	return out
}

// leaderSlot is the slot whose current process holds the Lease, or nil.
func leaderSlot(ctx context.Context, ns string, slots ...*slot) *slot {
	holder := env.LeaseHolder(ctx, ns, chaosLease)
	for _, s := range slots {
		if r := s.replica(); r != nil && r.Identity == holder && r.Running() {
			return s
		}
	}
	return nil
}

func waitLeaderSlot(t *testing.T, ns string, slots ...*slot) *slot {
	t.Helper()
	var l *slot
	poll.Eventually(t, "a running replica to hold the Lease", pollInterval, time.Minute, func(ctx context.Context) error {
		l = leaderSlot(ctx, ns, slots...)
		return poll.Done(l != nil, "held by %q", env.LeaseHolder(ctx, ns, chaosLease))
	})
	return l
}

// stopAll sends SIGTERM to the standbys, then to the leader (so that its
// release hands the Lease to nobody), and expects each to exit 0.
func stopAll(t *testing.T, ns string, slots ...*slot) {
	t.Helper()
	leader := leaderSlot(context.Background(), ns, slots...)
	ordered := slices.DeleteFunc(slices.Clone(slots), func(s *slot) bool { return s == leader })
	if leader != nil {
		ordered = append(ordered, leader)
	}
	for _, s := range ordered {
		r := s.replica()
		if !r.Running() {
			continue
		}
		if err := r.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code, err := r.Wait(40 * time.Second); err != nil || code != 0 {
			t.Errorf("%s exited with code %d (%v) after SIGTERM, want 0", r.Name, code, err)
		}
	}
}

// checkLeaders judges the test's leader election from the audit log, adds
// its writes after loss to the run's tally, and returns the report.
func checkLeaders(t *testing.T, ns string, forced bool) *framework.LeadershipReport {
	t.Helper()
	return checkLeadersWith(t, ns, timings.RenewDeadline, forced)
}

func checkLeadersWith(t *testing.T, ns string, renewDeadline time.Duration, forced bool) *framework.LeadershipReport {
	t.Helper()
	r := env.CheckLeadership(t, ns, chaosLease, renewDeadline, forced)
	writesAfterLoss.Add(int64(len(r.Outside)))
	return r
}

// expectLossExit waits for r to exit after it lost its Lease at lostAt:
// with code 1, its last line saying why, and within
// framework.LeaseLossExitSlack (Process.ExpectLossExit).
func expectLossExit(t *testing.T, r *framework.Replica, lostAt time.Time, why string) time.Duration {
	t.Helper()
	took := r.ExpectLossExit(t, lostAt, why)
	recordExitAfterLoss(took)
	return took
}

// expectLossExitAfterCut is expectLossExit for a replica cut off from the
// API server at cutAt: it lost its Lease at the renew deadline after its
// last renewal before the cut, which the audit log tells.
func expectLossExitAfterCut(t *testing.T, r *framework.Replica, ns string, cutAt time.Time) time.Duration {
	t.Helper()
	if _, err := r.Wait(framework.Timeout); err != nil {
		t.Fatalf("%s still runs %v after it was cut off: %v", r.Name, framework.Timeout, err)
	}
	lostAt := env.LeaseLoss(t, ns, chaosLease, timings.RenewDeadline, r.Identity, cutAt)
	return expectLossExit(t, r, lostAt, "not renewed within")
}

// TestLeaderFailover SIGKILLs the leader of two replicas mid-convergence,
// CHAOS_ROUNDS times, each time starting a fresh process to stand by. The
// standby must take over within the lease duration plus 5 s, and the audit
// log must show one leadership per kill (and the last), none overlapping,
// and no write outside its writer's leadership.
func TestLeaderFailover(t *testing.T) {
	rng := newRand(t)
	ns := env.Namespace(t)
	rounds := config.rounds
	a, b := newSlot(t, "a", ns, false), newSlot(t, "b", ns, false)

	want := map[string]spec{}
	var kills []struct {
		at     time.Time
		holder string
	}
	for r := range rounds {
		leader := waitLeaderSlot(t, ns, a, b)
		before := writesLogged(leader.replica().Process)
		batch := workRound(t, ns, rng, want, r, rounds)
		// At least two writes per new Book (ConfigMap, status) are to come;
		// the log lines only pick the moment of the kill.
		k := 1 + rng.IntN(batch)
		waitWritesLogged(t, leader.replica().Process, before, k)
		victim := leader.replica()
		if err := victim.Kill(); err != nil {
			t.Fatal(err)
		}
		faults.Add(1)
		kills = append(kills, struct {
			at     time.Time
			holder string
		}{victim.KilledAt(), victim.Identity})
		leader.start(t)
	}
	waitConverged(t, ns, expectation{want: want})
	stopAll(t, ns, a, b)

	rep := checkLeaders(t, ns, false)
	var took []time.Duration
	for i, k := range kills {
		next, ok := rep.FirstLeadershipAfter(k.at, k.holder)
		if !ok {
			t.Errorf("round %d: the audit log shows no takeover after the kill of %s", i, k.holder)
			continue
		}
		d := framework.ExpectTakeover(t, fmt.Sprintf("round %d, after the kill of %s", i, k.holder), k.at, next.From, timings.LeaseDuration)
		took = append(took, d)
		recordTakeover(d)
	}
	if got, want := len(rep.Periods), rounds+1; got != want {
		t.Errorf("%d leadership periods, want %d (one per kill, and the last leader's)", got, want)
	}
	figure(t, "%d leader SIGKILLs: takeover %s (lease %v); %d leadership periods, %d writes, %d outside their writer's leadership",
		rounds, spread(took), timings.LeaseDuration, len(rep.Periods), len(rep.Writes), len(rep.Outside))
}

// TestLeaseTaken takes the Lease from the leader mid-convergence and gives
// it to the standby, as a partitioned leader finds it: min(CHAOS_ROUNDS, 3)
// times. The old leader must exit (code 1) within the renew deadline plus
// 2 s, having written nothing after its last renewal plus the renew
// deadline; it is restarted as a standby; the Books converge.
func TestLeaseTaken(t *testing.T) {
	rng := newRand(t)
	ns := env.Namespace(t)
	rounds := min(config.rounds, 3)
	a, b := newSlot(t, "a", ns, false), newSlot(t, "b", ns, false)
	want := map[string]spec{}
	for r := range rounds {
		leader := waitLeaderSlot(t, ns, a, b)
		standby := a
		if leader == a {
			standby = b
		}
		old := leader.replica()
		before := writesLogged(old.Process)
		batch := workRound(t, ns, rng, want, r, rounds)
		k := 1 + rng.IntN(batch)
		waitWritesLogged(t, old.Process, before, k)
		takenAt := env.TakeLease(t, ns, chaosLease, standby.replica().Identity)
		faults.Add(1)
		took := expectLossExit(t, old, takenAt, fmt.Sprintf("held by %q", standby.replica().Identity))
		t.Logf("round %d: the Lease was taken from %s after %d of its writes; it exited %v later", r, old.Name, k, took.Round(time.Millisecond))
		leader.start(t)
	}
	waitConverged(t, ns, expectation{want: want})
	stopAll(t, ns, a, b)
	rep := checkLeaders(t, ns, true)
	figure(t, "%d Leases taken mid-convergence: %d writes, %d after their writer's loss, %d between the take and the old leader noticing",
		rounds, len(rep.Writes), len(rep.Outside), len(rep.Stale))
}

// TestLeaderPartitioned black-holes the leader's connection to the API
// server (accepted, never answered, never closed) for 30 s, then heals it,
// while Books are created and changed. The standby must take over within
// the lease duration plus 5 s; the old leader must stop writing at its
// renew deadline and exit; after the heal nothing of it reaches the API
// server; every Book converges.
func TestLeaderPartitioned(t *testing.T) {
	const partition = 30 * time.Second
	rng := newRand(t)
	ns := env.Namespace(t)
	a, b := newSlot(t, "a", ns, true), newSlot(t, "b", ns, true)
	want := map[string]spec{}
	workRound(t, ns, rng, want, 0, 2)

	leader := waitLeaderSlot(t, ns, a, b)
	old := leader.replica()
	cutAt := time.Now()
	leader.proxy.BlackHole()
	faults.Add(1)
	workRound(t, ns, rng, want, 1, 2)
	took := expectLossExitAfterCut(t, old, ns, cutAt)
	time.Sleep(time.Until(cutAt.Add(partition))) // the partition's length: the fault itself
	leader.proxy.Pass()
	healedAt := time.Now()
	leader.start(t) // the pod restarts, behind the healed network
	waitConverged(t, ns, expectation{want: want})
	stopAll(t, ns, a, b)

	rep := checkLeaders(t, ns, false)
	next, ok := rep.FirstLeadershipAfter(cutAt, old.Identity)
	if !ok {
		t.Fatalf("the audit log shows no takeover after the partition")
	}
	takeover := framework.ExpectTakeover(t, "after the partition began", cutAt, next.From, timings.LeaseDuration)
	recordTakeover(takeover)
	// Writes already past the proxy when it was cut land a few
	// milliseconds later; after the heal, nothing of the old leader may.
	var inFlight int
	for _, w := range rep.Writes {
		switch {
		case w.Writer != old.Identity:
		case w.At.After(healedAt):
			t.Errorf("a write of the partitioned leader reached the API server after the heal at %s: %s", healedAt.Format("15:04:05.000"), w)
		case w.At.After(cutAt):
			inFlight++
		}
	}
	figure(t, "leader partitioned for %v: it exited %v after its loss (its last renewal plus the renew deadline), the standby took over %v after the cut; none of its writes after the heal (%d in flight at the cut)",
		partition, took.Round(10*time.Millisecond), takeover.Round(10*time.Millisecond), inFlight)
}

// TestSlowAPIServer adds 2 s to every request of the leader (its proxy
// holds what it sends for 2 s), following leadership wherever it moves, for
// a minute, while Books are created and changed. Leaders that can no longer
// renew in time stop and exit, and are restarted, so leadership moves; the
// audit log must never show two writers at once or a write after its
// writer's loss, and every Book converges once the latency is gone.
//
// A write the fence admits just before its deadline still travels for the
// 2 s the proxy holds it. The fence can only promise that no other replica
// writes meanwhile while that time stays below the lease duration minus the
// renew deadline (5 s with the defaults), so this test uses 8 s / 4 s / 1 s.
func TestSlowAPIServer(t *testing.T) {
	const slow, latency = time.Minute, 2 * time.Second
	lt := framework.LeaderTimings{LeaseDuration: 8 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: time.Second}
	rng := newRand(t)
	ns := env.Namespace(t)
	// The elector's decisions (V(4)) are shown if the test fails.
	a := newSlotWith(t, "a", ns, true, lt, "--vmodule=leaderelection=4")
	b := newSlotWith(t, "b", ns, true, lt, "--vmodule=leaderelection=4")
	slots := []*slot{a, b}
	waitLeaderSlot(t, ns, slots...)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var exits []string
	// The network: the leader's proxy is slow, the others' not.
	wg.Go(func() {
		until := time.Now().Add(slow)
		for time.Now().Before(until) && ctx.Err() == nil {
			l := leaderSlot(ctx, ns, slots...)
			for _, s := range slots {
				if s == l {
					s.proxy.Latency(latency)
				} else {
					s.proxy.Pass()
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, s := range slots {
			s.proxy.Pass()
		}
	})
	// The Deployment: a replica that exits is replaced.
	wg.Go(func() {
		for ctx.Err() == nil {
			for _, s := range slots {
				if r := s.replica(); !r.Running() {
					code, _ := r.ExitCode()
					mu.Lock()
					exits = append(exits, fmt.Sprintf("%s (code %d)", r.Name, code))
					mu.Unlock()
					faults.Add(1)
					s.start(t)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	want := map[string]spec{}
	rounds := 4
	for r := range rounds {
		workRound(t, ns, rng, want, r, rounds)
		time.Sleep(slow / time.Duration(rounds+1))
	}
	time.Sleep(slow / time.Duration(rounds+1))
	waitConverged(t, ns, expectation{want: want})
	stop()
	wg.Wait()
	stopAll(t, ns, slots...)

	// A write admitted just before the fence's deadline arrives up to
	// latency later: the promise is that none arrives after the deadline
	// plus that travel, which stays short of the lease duration, so no
	// successor can have acquired meanwhile.
	rep := checkLeadersWith(t, ns, lt.RenewDeadline+latency, false)
	for _, r := range replicas(slots...) {
		if code, ok := r.ExitCode(); ok && code != 0 && code != 1 {
			t.Errorf("%s exited with code %d, want 0 (SIGTERM) or 1 (lost the Lease)", r.Name, code)
		}
		if t.Failed() {
			var b strings.Builder
			for _, l := range r.Lines() {
				if strings.Contains(l.Text, "leaderelection.go") || strings.Contains(l.Text, "Starting Book controller") || strings.Contains(l.Text, "error:") {
					fmt.Fprintf(&b, "%s %s\n", l.At.Format("15:04:05.000"), l.Text)
				}
			}
			t.Logf("%s (%s):\n%s", r.Name, r.Identity, b.String())
		}
	}
	slack := "none ended at its deadline"
	if rep.MinSlack >= 0 {
		slack = rep.MinSlack.Round(time.Millisecond).String()
	}
	figure(t, "%v of +%v on the leader's requests: %d leadership periods, %d replicas exited (%v); %d writes, %d outside their writer's leadership, %d periods overlapping; closest write to a lost leader's deadline plus the travel: %s before it",
		slow, latency, len(rep.Periods), len(exits), exits, len(rep.Writes), len(rep.Outside), len(rep.Overlaps), slack)
}

// TestSIGTERMDuringTakeover kills the leader and, the moment the standby
// takes the Lease over a full queue, sends it SIGTERM: min(CHAOS_ROUNDS, 3)
// times. Whether its workers started or not, it must write only while it
// holds the Lease, release it, and exit 0.
func TestSIGTERMDuringTakeover(t *testing.T) {
	rng := newRand(t)
	ns := env.Namespace(t)
	rounds := min(config.rounds, 3)
	a, b := newSlot(t, "a", ns, false), newSlot(t, "b", ns, false)
	want := map[string]spec{}
	workRound(t, ns, rng, want, 0, rounds+1)
	for r := range rounds {
		leader := waitLeaderSlot(t, ns, a, b)
		standby := a
		if leader == a {
			standby = b
		}
		if err := leader.replica().Kill(); err != nil {
			t.Fatal(err)
		}
		workRound(t, ns, rng, want, r+1, rounds+1)
		next := standby.replica()
		poll.Eventually(t, next.Name+" to take the Lease", pollInterval, time.Minute, env.LeaseHeldBy(ns, chaosLease, next.Identity))
		if err := next.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		faults.Add(2)
		if code, err := next.Wait(40 * time.Second); err != nil || code != 0 {
			t.Errorf("round %d: %s exited with code %d (%v) after SIGTERM, want 0", r, next.Name, code, err)
		}
		leader.start(t)
		standby.start(t)
	}
	waitConverged(t, ns, expectation{want: want})
	stopAll(t, ns, a, b)
	rep := checkLeaders(t, ns, false)
	released := 0
	for _, p := range rep.Periods {
		if p.Released {
			released++
		}
	}
	if released < rounds {
		t.Errorf("%d leadership periods ended by a release, want at least %d (one per SIGTERM during a takeover)", released, rounds)
	}
	figure(t, "%d SIGTERMs as a standby took over: %d leadership periods (%d released), %d writes, %d outside their writer's leadership",
		rounds, len(rep.Periods), released, len(rep.Writes), len(rep.Outside))
}

// TestSIGTERMDuringDrainLosingTheLease sends the leader SIGTERM while its
// queue is long (one worker, 300 ms added to its requests), then
// black-holes its connection so that it can no longer renew. The fence must
// end the drain: the leader exits 1 within the renew deadline plus 2 s of
// the cut, with no write after its loss; the standby takes over and every
// Book converges.
func TestSIGTERMDuringDrainLosingTheLease(t *testing.T) {
	rng := newRand(t)
	ns := env.Namespace(t)
	a, b := newSlot(t, "a", ns, true, "--workers", "1"), newSlot(t, "b", ns, true, "--workers", "1")
	leader := waitLeaderSlot(t, ns, a, b)
	leader.proxy.Latency(300 * time.Millisecond)
	want := map[string]spec{}
	workRound(t, ns, rng, want, 0, 1)
	old := leader.replica()
	signalled := time.Now()
	if err := old.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// A drain, not an exit at once: a write that reached the API server
	// more than the proxy's latency after the SIGTERM was sent after it.
	env.WaitForWriteAfter(t, ns, old.Identity, signalled.Add(300*time.Millisecond), old.Process)
	cutAt := time.Now()
	leader.proxy.BlackHole()
	faults.Add(2)
	took := expectLossExitAfterCut(t, old, ns, cutAt)
	leader.proxy.Pass()
	leader.start(t)
	waitConverged(t, ns, expectation{want: want})
	stopAll(t, ns, a, b)
	rep := checkLeaders(t, ns, false)
	next, ok := rep.FirstLeadershipAfter(cutAt, old.Identity)
	if ok {
		recordTakeover(next.From.Sub(cutAt))
	}
	figure(t, "SIGTERM, then the Lease lost during the drain: the leader exited %v after its loss (its last renewal plus the renew deadline); %d writes, %d outside their writer's leadership",
		took.Round(10*time.Millisecond), len(rep.Writes), len(rep.Outside))
}
