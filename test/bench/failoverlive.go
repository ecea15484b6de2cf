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
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
)

// failoverLiveUnit is restartLiveUnit with leader election and a warm
// standby: N Books are created in one namespace, and for each
// configuration in turn a leader converges them (the first) or goes idle
// over them (the next), a standby starts and syncs, and the leader is
// SIGKILLed under the live writer (failoverLive).
func (e *env) failoverLiveUnit(ctx context.Context, configs []string) (*Phase, []*LiveRestart, error) {
	p := e.newPhase("failover-live-"+strings.Join(configs, "-")+"-setup", "backlog", e.leaderElected(e.controller(configs[0])))
	if err := e.prepare(ctx, p); err != nil {
		return p, nil, err
	}
	if _, err := e.createBooks(ctx, p.Namespace, e.o.n, e.o.preCreateConcy, 0); err != nil {
		return p, nil, err
	}
	var out []*LiveRestart
	for run, config := range configs {
		x, err := e.failoverLive(ctx, p, config, run)
		if x != nil {
			out = append(out, x)
		}
		if err != nil {
			return p, out, err
		}
	}
	return p, out, nil
}

// failoverLive runs a leader of the configuration until every Book of p's
// namespace is Ready and it is idle, then a standby until its caches are
// synced, SIGKILLs the leader, and from liveDelay after the kill the live
// writer creates and edits Books while the standby takes the Lease and
// works through the Books its informers listed. Latencies count from the
// write or from the moment the standby took the Lease, whichever is later,
// and from the write alone. The standby is stopped and the Lease deleted
// at the end, so that a next run starts from no holder.
func (e *env) failoverLive(ctx context.Context, p *Phase, config string, run int) (*LiveRestart, error) {
	s := e.leaderElected(e.controller(config))
	ns, lease := p.Namespace, leaseOf(config)
	defer e.kube.CoordinationV1().Leases(ns).Delete(context.WithoutCancel(ctx), lease, metav1.DeleteOptions{})
	leader, err := e.leadUntilIdle(ctx, p, s, run)
	if leader != nil {
		defer stopIfRunning(leader)
	}
	if err != nil {
		return nil, err
	}
	standby, err := e.startController(s, ns, e.logName("failover-live-"+config+"-standby"))
	if err != nil {
		return nil, err
	}
	defer stopIfRunning(standby)
	if waitReadyz(ctx, standby).IsZero() {
		return nil, errors.New("failover-live: the standby never synced its caches")
	}
	holder, err := e.leaseHolder(ctx, ns, lease)
	if err != nil {
		return nil, err
	}
	books, titles, before, err := e.watchLive(ctx, ns)
	if err != nil {
		return nil, err
	}
	defer books.stop()
	defer titles.stop()
	x := &LiveRestart{Round: e.round, Config: config, Controller: s.Name, Namespace: ns, N: e.o.n, Run: run,
		Converged: before.books(), NewBooks: liveOps, Edits: liveEdits(e.o.n), Failover: true}
	x.OtherCoresBusyAtStart, x.APIServerGC = e.settle(ctx) // as restartLive, before its start
	if err := leader.Kill(); err != nil {
		return nil, err
	}
	killed := time.Now()
	taken := make(chan time.Time, 1)
	go func() { taken <- e.waitLeaseTaken(ctx, ns, lease, holder) }()
	time.Sleep(liveDelay)
	created, edited, err := e.writeLive(ctx, ns, run)
	if err != nil {
		return nil, err
	}
	takenAt := <-taken
	if takenAt.IsZero() {
		return nil, fmt.Errorf("failover-live: nobody took the Lease %s from %s", lease, holder)
	}
	x.SyncedSeconds = round(takenAt.Sub(killed).Seconds(), 3)
	if err := e.waitLanded(ctx, books, titles, created, edited, run); err != nil {
		return nil, err
	}
	x.latencies(takenAt, created, books.readyAt, edited, titles.snapshot())
	idle, err := e.waitIdle(ctx, standby, true)
	if err != nil {
		return nil, err
	}
	x.IdleSeconds = round(standby.start.Add(time.Duration(idle*float64(time.Second))).Sub(killed).Seconds(), 3)
	x.UntouchedWritten, err = e.untouchedWritten(ctx, ns, before, edited)
	return x, err
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

// leadUntilIdle runs a leader until every Book of the namespace is Ready
// and it is idle; the first run's convergence is p's figures. The leader
// keeps running.
func (e *env) leadUntilIdle(ctx context.Context, p *Phase, s controllerSpec, run int) (*proc, error) {
	w, err := e.watchReady(ctx, p.Namespace, e.o.n+run*liveOps)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	leader, err := e.startController(s, p.Namespace, e.logName(p.Name+"-leader-"+s.Config))
	if err != nil {
		return nil, err
	}
	if err := w.wait(ctx, e.o.timeout); err != nil {
		return leader, fmt.Errorf("%s: %w", p.Name, err)
	}
	if run == 0 {
		p.finishReady(leader.start, w.readyAt)
	}
	_, err = e.waitIdle(ctx, leader, true)
	return leader, err
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
