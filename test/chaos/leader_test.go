//go:build chaos && linux

package chaos_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/test/integration/framework"
)

// Short leader-election timings, as in test/integration/binary.
const (
	chaosLease         = "book-controller-chaos"
	chaosLeaseDuration = 4 * time.Second
)

var leaderArgs = func(ns string) []string {
	return []string{"--leader-elect", "--leader-elect-namespace", ns, "--leader-elect-id", chaosLease,
		"--leader-elect-lease-duration", chaosLeaseDuration.String(), "--leader-elect-renew-deadline", "3s",
		"--leader-elect-retry-period", "500ms"}
}

// TestLeaderFailover runs two controller processes with leader election and
// SIGKILLs the leader mid-convergence, CHAOS_ROUNDS times, each time
// starting a fresh process to stand by. The standby must take the Lease
// within the lease duration plus 5s. Across the run it records every
// transition of the Lease (a watch) and every process's log, and shows that
// no two replicas did work at once: each replica's write log lines fall
// inside its own leadership intervals ("Became the leader" until "Stopped
// leading" or its death), and the intervals of all replicas don't overlap.
func TestLeaderFailover(t *testing.T) {
	rng := newRand(t)
	ns := env.Namespace(t)
	lease := watchLease(t, ns, chaosLease)
	rounds := config.rounds

	var procs []*framework.Process
	startReplica := func() {
		p := startBinary(t, fmt.Sprintf("replica-%02d", len(procs)), ns, leaderArgs(ns)...)
		procs = append(procs, p)
		// Past the preflight check: a SIGTERM before that is reported as
		// "cannot reach the API server (context canceled)", exit code 1.
		eventually(t, time.Minute, p.Name+" to start", func() bool {
			return p.CountLines("Starting Book controller") > 0 || !p.Running()
		})
	}
	startReplica()
	startReplica()

	want := map[string]spec{}
	var takeovers []time.Duration
	for r := range rounds {
		// The leader, and its writes so far, before the round's work exists:
		// the k writes waited for below are all this round's.
		var leader *framework.Process
		eventually(t, time.Minute, "a running replica to lead", func() bool {
			leader = leaderOf(procs, lease.holder())
			return leader != nil && leader.Running()
		})
		before := writesLogged(leader)

		batch := workRound(t, ns, rng, want, r, rounds)

		// At least two writes per new Book (ConfigMap, status) are to come.
		k := 1 + rng.IntN(batch)
		eventually(t, time.Minute, fmt.Sprintf("%s to log %d more writes", leader.Name, k), func() bool {
			return writesLogged(leader)-before >= k
		})
		holder := lease.holder()
		if err := leader.Kill(); err != nil {
			t.Fatal(err)
		}
		faults.Add(1)
		killedAt := leader.KilledAt()
		var took time.Duration
		eventually(t, chaosLeaseDuration+time.Minute, "another replica to take the Lease", func() bool {
			for _, tr := range lease.transitions() {
				if tr.at.After(killedAt) && tr.holder != "" && tr.holder != holder {
					took = tr.at.Sub(killedAt)
					return true
				}
			}
			return false
		})
		takeovers = append(takeovers, took)
		t.Logf("round %d: SIGKILLed leader %s after %d writes; the Lease moved %v later", r, leader.Name, writesLogged(leader), took.Round(time.Millisecond))
		if took > chaosLeaseDuration+5*time.Second {
			t.Errorf("round %d: takeover took %v, want within %v", r, took, chaosLeaseDuration+5*time.Second)
		}
		startReplica()
	}
	waitConverged(t, ns, expectation{want: want})

	// Stop the standbys first, so that the leader's release on SIGTERM
	// hands the Lease to nobody, then the leader; each must exit 0.
	leader := leaderOf(procs, lease.holder())
	for _, p := range append(slices.DeleteFunc(slices.Clone(procs), func(p *framework.Process) bool { return p == leader }), leader) {
		if p == nil || !p.Running() {
			continue
		}
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code, err := p.Wait(40 * time.Second); err != nil || code != 0 {
			t.Errorf("%s exited with code %d (%v) after SIGTERM, want 0", p.Name, code, err)
		}
	}

	intervals, writes, violations := leadershipReport(procs)
	for _, v := range violations {
		t.Error(v)
	}
	trs := lease.transitions()
	t.Logf("Lease holder transitions (%d):", len(trs))
	for _, tr := range trs {
		t.Logf("  %s  %q", tr.at.Format("15:04:05.000000"), tr.holder)
	}
	t.Logf("leadership intervals (%d):", len(intervals))
	for _, iv := range intervals {
		t.Logf("  %s  %s .. %s  %d writes", iv.proc, iv.start.Format("15:04:05.000000"), iv.end.Format("15:04:05.000000"), iv.writes)
	}
	if got, want := len(intervals), rounds+1; got != want {
		t.Errorf("%d leadership intervals, want %d (one per kill, and the last leader)", got, want)
	}
	slices.Sort(takeovers)
	figure(t, "%d leader SIGKILLs: takeover in %v..%v (median %v; lease %v); %d leadership intervals, %d writes, none outside its interval, no overlap",
		rounds, takeovers[0].Round(10*time.Millisecond), takeovers[len(takeovers)-1].Round(10*time.Millisecond),
		takeovers[len(takeovers)/2].Round(10*time.Millisecond), chaosLeaseDuration, len(intervals), writes)
}

var identityRE = regexp.MustCompile(`identity="([^"]+)"`)

// leaderOf is the process that announced leadership under identity.
func leaderOf(procs []*framework.Process, identity string) *framework.Process {
	if identity == "" {
		return nil
	}
	for _, p := range procs {
		for _, l := range p.Lines() {
			if strings.Contains(l.Text, "Became the leader") {
				if m := identityRE.FindStringSubmatch(l.Text); m != nil && m[1] == identity {
					return p
				}
			}
		}
	}
	return nil
}

type interval struct {
	proc       string
	start, end time.Time
	writes     int
}

// leadershipReport reconstructs each process's leadership intervals from
// its log and checks that every write line lies inside one of its own
// intervals and that no two intervals overlap.
func leadershipReport(procs []*framework.Process) (intervals []interval, writes int, violations []string) {
	for _, p := range procs {
		var mine []interval
		var open *interval
		var writeTimes []time.Time
		var last time.Time
		for _, l := range p.Lines() {
			ts, ok := klogTime(l.Text)
			if !ok {
				continue
			}
			last = ts
			switch {
			case strings.Contains(l.Text, "Became the leader"):
				if open != nil {
					violations = append(violations, fmt.Sprintf("%s became the leader twice without stopping", p.Name))
				}
				open = &interval{proc: p.Name, start: ts}
			case strings.Contains(l.Text, "Stopped leading"):
				if open != nil {
					open.end = ts
					mine = append(mine, *open)
					open = nil
				}
			case isWriteLine(l.Text):
				writeTimes = append(writeTimes, ts)
			}
		}
		if open != nil {
			// Killed while leading: its leadership ended at the kill at the
			// latest (its last line is earlier still).
			open.end = p.KilledAt()
			if open.end.IsZero() {
				open.end = last
			}
			mine = append(mine, *open)
		}
		for _, w := range writeTimes {
			writes++
			inside := false
			for i := range mine {
				if !w.Before(mine[i].start) && !w.After(mine[i].end) {
					mine[i].writes++
					inside = true
					break
				}
			}
			if !inside {
				violations = append(violations, fmt.Sprintf("%s logged a write at %s, outside its leadership", p.Name, w.Format("15:04:05.000000")))
			}
		}
		intervals = append(intervals, mine...)
	}
	sort.Slice(intervals, func(i, j int) bool { return intervals[i].start.Before(intervals[j].start) })
	for i := 1; i < len(intervals); i++ {
		if prev, cur := intervals[i-1], intervals[i]; cur.start.Before(prev.end) {
			violations = append(violations, fmt.Sprintf("%s led from %s while %s led until %s",
				cur.proc, cur.start.Format("15:04:05.000000"), prev.proc, prev.end.Format("15:04:05.000000")))
		}
	}
	return intervals, writes, violations
}

type transition struct {
	at     time.Time
	holder string
}

// leaseWatch records the holder of a Lease each time it changes.
type leaseWatch struct {
	mu  sync.Mutex
	trs []transition
}

func (lw *leaseWatch) transitions() []transition {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return slices.Clone(lw.trs)
}

func (lw *leaseWatch) holder() string {
	trs := lw.transitions()
	if len(trs) == 0 {
		return ""
	}
	return trs[len(trs)-1].holder
}

// watchLease watches the Lease until the end of the test.
func watchLease(t *testing.T, ns, name string) *leaseWatch {
	lw := &leaseWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		leases := env.Kube.CoordinationV1().Leases(ns)
		rv := ""
		for ctx.Err() == nil {
			w, err := leases.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: rv})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				l, ok := ev.Object.(*coordinationv1.Lease)
				if !ok {
					rv = "" // an error event: start over from the current state
					break
				}
				rv = l.ResourceVersion
				h := ""
				if l.Spec.HolderIdentity != nil {
					h = *l.Spec.HolderIdentity
				}
				lw.mu.Lock()
				if len(lw.trs) == 0 || lw.trs[len(lw.trs)-1].holder != h {
					lw.trs = append(lw.trs, transition{at: time.Now(), holder: h})
				}
				lw.mu.Unlock()
			}
			w.Stop()
		}
	}()
	return lw
}
