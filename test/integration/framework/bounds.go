//go:build linux

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

package framework

import (
	"strings"
	"testing"
	"time"
)

// The tests keep a wall-clock bound only where the time is the feature:
// how soon a replica that lost its Lease stops, and how soon a standby takes
// an expired Lease over. Each bound is a moment the design fixes (the
// moment of the loss; the moment the old leader's lease expired at the
// latest) plus a slack: three times the p99 of that slack as measured on
// the 2-core machine the tests run on, with two control planes sharing it.
// Every check logs its sample as a "bound-sample" line.
// fork:begin bench
// `make bench-bounds` (test/bench -bounds) collects them over many runs into
// docs/bench/bounds.md; docs/benchmark.md says where the figures below
// come from.
// fork:end bench
const (
	// LeaseLossExitSlack bounds the time from a replica's loss of its
	// Lease (the Lease written to name another holder, or its renew
	// deadline passed) to the replica having stopped: manager.Run
	// returned, or the process exited.
	LeaseLossExitSlack = 3 * leaseLossExitP99
	// TakeoverSlack bounds the time from the moment the old leader's lease
	// expired at the latest (its loss, or its stop, plus the lease
	// duration) to a standby's acquisition of the Lease.
	TakeoverSlack = 3 * takeoverP99

	// The p99s measured on 2026-12-04: 150 and 59 samples, maxima 1508
	// and 1560 ms.
	// By `make bench-bounds BOUNDS_COUNT=30` (docs/bench/bounds.md). // fork:line bench
	leaseLossExitP99 = 718 * time.Millisecond
	takeoverP99      = 1560 * time.Millisecond
)

// Names of the bound samples, as BoundSample logs them.
const (
	SampleLeaseLossExit = "lease-loss-exit"
	SampleTakeover      = "takeover"
)

// BoundSample logs one measurement of a bound's slack, for the bench:
// "bound-sample <name> <milliseconds> <what>".
func BoundSample(t testing.TB, name string, slack time.Duration, what string) {
	t.Helper()
	t.Logf("bound-sample %s %.1f %s", name, float64(slack)/float64(time.Millisecond), strings.Join(strings.Fields(what), "_"))
}

// ExpectStopAfterLeaseLoss waits for a replica that lost its Lease at
// lostAt to stop (stopped closed, stoppedAt the moment) and fails the test
// unless it stopped within LeaseLossExitSlack of lostAt. It returns how
// long the replica took. A replica still running Timeout past the bound
// fails the test at once.
func ExpectStopAfterLeaseLoss(t testing.TB, who string, lostAt time.Time, stopped <-chan struct{}, stoppedAt func() time.Time) time.Duration {
	t.Helper()
	select {
	case <-stopped:
	case <-time.After(time.Until(lostAt.Add(LeaseLossExitSlack + Timeout))):
		t.Fatalf("%s still runs %v after losing its Lease", who, time.Since(lostAt).Round(time.Millisecond))
	}
	took := stoppedAt().Sub(lostAt)
	BoundSample(t, SampleLeaseLossExit, took, who)
	if took > LeaseLossExitSlack {
		t.Errorf("%s stopped %v after losing its Lease, want within %v (3 × the p99 measured: framework.LeaseLossExitSlack)",
			who, took.Round(time.Millisecond), LeaseLossExitSlack)
	}
	return took
}

// ExpectLossExit is ExpectStopAfterLeaseLoss for a controller process: it
// must also exit with code 1, its last line saying why it did (containing
// why).
func (p *Process) ExpectLossExit(t testing.TB, lostAt time.Time, why string) time.Duration {
	t.Helper()
	took := ExpectStopAfterLeaseLoss(t, p.Name, lostAt, p.Exited(), p.ExitedAt)
	t.Logf("%s exited %v after losing its Lease; its last lines:\n%s", p.Name, took.Round(time.Millisecond), p.Tail(6))
	if code, _ := p.ExitCode(); code != 1 {
		t.Errorf("%s exited with code %d after losing its Lease, want 1", p.Name, code)
	}
	lines := strings.Split(strings.TrimSpace(p.Output()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "book-controller: error: lost leader election") || !strings.Contains(last, why) {
		t.Errorf("%s's last line is %q, want the reason it exited (lost leader election, %s)", p.Name, last, why)
	}
	return took
}

// ExpectTakeover checks that a standby acquired the Lease at acquired,
// within the lease duration plus TakeoverSlack of lostAt, the moment the
// old leader lost or gave up its Lease (killed, cut off, stopped), and
// returns how long after lostAt that was.
func ExpectTakeover(t testing.TB, what string, lostAt, acquired time.Time, lease time.Duration) time.Duration {
	t.Helper()
	took := acquired.Sub(lostAt)
	BoundSample(t, SampleTakeover, took-lease, what)
	if took > lease+TakeoverSlack {
		t.Errorf("%s: the Lease was taken over %v after it was lost, want within the %v lease duration + %v (3 × the p99 measured: framework.TakeoverSlack)",
			what, took.Round(time.Millisecond), lease, TakeoverSlack)
	}
	return took
}

// LossAt is when holder lost, as the API server saw it, the leadership it
// held at at: the end of that period (its last renewal standbys could see
// plus the renew deadline), or the moment the Lease was written to name
// another holder, if that came first. ok is false if holder had not
// acquired the Lease by at, or gave it up by a release.
func (r *LeadershipReport) LossAt(holder string, at time.Time) (lost time.Time, ok bool) {
	p, found := r.LastLeadershipOf(holder, at)
	if !found || p.Released {
		return time.Time{}, false
	}
	lost = p.Until
	if !p.MovedAt.IsZero() && p.MovedAt.Before(lost) {
		lost = p.MovedAt
	}
	return lost, true
}

// LeaseLoss reads the audit log and returns when holder lost the
// leadership it held at at (LossAt) on the Lease leaseNS/leaseName, whose
// holders have renewDeadline; it fails the test if holder held none. A
// replica cut off from the API server loses its Lease at a moment only the
// API server's record tells: its last renewal before the cut plus the
// renew deadline.
func (e *Env) LeaseLoss(t testing.TB, leaseNS, leaseName string, renewDeadline time.Duration, holder string, at time.Time) time.Time {
	t.Helper()
	r, err := Leaderships(e.AuditLog(t), leaseNS, leaseName, "", renewDeadline)
	if err != nil {
		t.Fatal(err)
	}
	lost, ok := r.LossAt(holder, at)
	if !ok {
		t.Fatalf("the audit log shows no leadership of %s at %s that it lost: %v", holder, at.Format("15:04:05.000"), r.Periods)
	}
	return lost
}
