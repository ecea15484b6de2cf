package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
)

// failoverLivePhase is restartLivePhase with a warm standby: the leader
// converges N Books, a second replica starts and syncs its caches, the
// leader is SIGKILLed, and from liveDelay after the kill the live writer
// creates and edits Books while the standby takes the Lease and works
// through the Books its informers listed. Latencies count from the write or
// from the moment the standby took the Lease, whichever is later, and from
// the write alone.
func (e *env) failoverLivePhase(ctx context.Context, config string) (*Phase, *LiveRestart, error) {
	s := e.leaderElected(e.controller(config))
	p := e.newPhase("failover-live-"+config+"-setup", "backlog", s)
	if err := e.prepare(ctx, p); err != nil {
		return p, nil, err
	}
	x := &LiveRestart{Round: e.round, Config: config, Controller: s.Name, Namespace: p.Namespace, N: e.o.n,
		NewBooks: liveOps, Edits: liveEdits(e.o.n), Failover: true}
	leader, err := e.convergeWithLeader(ctx, p, s)
	if leader != nil {
		defer stopIfRunning(leader)
	}
	if err != nil {
		return p, nil, err
	}
	standby, err := e.startController(s, p.Namespace, e.logName("failover-live-"+config+"-standby"))
	if err != nil {
		return p, nil, err
	}
	defer stopIfRunning(standby)
	if waitReadyz(ctx, standby).IsZero() {
		return p, nil, errors.New("failover-live: the standby never synced its caches")
	}
	lease := leaseOf(config)
	holder, err := e.leaseHolder(ctx, p.Namespace, lease)
	if err != nil {
		return p, nil, err
	}
	books, err := e.watchReady(ctx, p.Namespace, e.o.n+liveOps)
	if err != nil {
		return p, nil, err
	}
	defer books.stop()
	titles := e.watchTitles(ctx, p.Namespace)
	defer titles.stop()

	before, err := e.versions(ctx, p.Namespace)
	if err != nil {
		return p, nil, err
	}
	if err := leader.Kill(); err != nil {
		return p, nil, err
	}
	killed := time.Now()
	taken := make(chan time.Time, 1)
	go func() { taken <- e.waitLeaseTaken(ctx, p.Namespace, lease, holder) }()
	time.Sleep(liveDelay)
	created, edited, err := e.writeLive(ctx, p.Namespace)
	if err != nil {
		return p, nil, err
	}
	takenAt := <-taken
	if takenAt.IsZero() {
		return p, nil, fmt.Errorf("failover-live: nobody took the Lease %s from %s", lease, holder)
	}
	x.SyncedSeconds = round(takenAt.Sub(killed).Seconds(), 3)
	if err := e.waitLanded(ctx, books, titles, created, edited); err != nil {
		return p, nil, err
	}
	x.latencies(takenAt, created, books.readyAt, edited, titles.snapshot())
	idle, err := e.waitIdle(ctx, standby, true)
	if err != nil {
		return p, nil, err
	}
	x.IdleSeconds = round(standby.start.Add(time.Duration(idle*float64(time.Second))).Sub(killed).Seconds(), 3)
	x.UntouchedWritten, err = e.untouchedWritten(ctx, p.Namespace, before, edited)
	return p, x, err
}

// leaderElected is a configuration with leader election on, its Lease in
// the phase's namespace.
func (e *env) leaderElected(s controllerSpec) controllerSpec {
	args := s.args
	s.args = func(ns, metrics, probe string) []string {
		a := append(args(ns, metrics, probe), "--leader-elect")
		if s.bin == e.ours {
			a = append(a, "--leader-elect-namespace", ns, "--leader-elect-id", ourLease)
		}
		return a
	}
	return s
}

// The Leases of the two controllers: ours by --leader-elect-id; the twin's
// is fixed (examples/controller-runtime/cmd/main.go), in the namespace it
// watches.
const (
	ourLease  = "book-controller"
	twinLease = "book-controller-runtime.webapp.ydzs.io"
)

func leaseOf(config string) string {
	if config == "ours" || config == "ours-fifo" {
		return ourLease
	}
	return twinLease
}

// convergeWithLeader creates N Books and runs a leader until they are all
// Ready; the leader keeps running.
func (e *env) convergeWithLeader(ctx context.Context, p *Phase, s controllerSpec) (*proc, error) {
	if _, err := e.createBooks(ctx, p.Namespace, e.o.n, e.o.preCreateConcy, 0); err != nil {
		return nil, err
	}
	w, err := e.watchReady(ctx, p.Namespace, e.o.n)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	leader, err := e.startController(s, p.Namespace, e.logName(p.Name))
	if err != nil {
		return nil, err
	}
	if err := w.wait(ctx, e.o.timeout); err != nil {
		return leader, fmt.Errorf("%s: %w", p.Name, err)
	}
	p.finishReady(leader.start, w.readyAt)
	return leader, nil
}

func stopIfRunning(pr *proc) {
	if !pr.exited() {
		pr.terminate()
	}
}

// leaseHolder waits for the Lease to have a holder and returns it.
func (e *env) leaseHolder(ctx context.Context, ns, name string) (string, error) {
	var holder string
	err := poll.Until(ctx, "a holder of Lease "+name, 20*time.Millisecond, time.Minute, func(ctx context.Context) error {
		l, err := e.kube.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		return poll.Done(holder != "", "no holder yet")
	})
	return holder, err
}

// waitLeaseTaken returns when the Lease was first seen held by another than
// old, or the zero time after the phase's timeout.
func (e *env) waitLeaseTaken(ctx context.Context, ns, name, old string) time.Time {
	deadline := time.Now().Add(e.o.timeout)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		l, err := e.kube.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && *l.Spec.HolderIdentity != old {
			return time.Now()
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}
}
