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
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"ydzs.io/book-controller/pkg/localcluster"
)

// quietWindow is how long a restarted controller must make no request
// (and have an empty queue and no active worker) to count as idle.
const quietWindow = 2 * time.Second

// watchListOff is the client-go feature gate, set through its environment
// variable, that turns streaming lists (WatchListClient, on by default
// since client-go v0.35) off: informers then fill their caches with a
// paginated LIST, as before.
const watchListOff = "KUBE_FEATURE_WatchListClient=false"

// withWatchListOff is s with client-go's streaming lists off.
func withWatchListOff(s controllerSpec) controllerSpec {
	s.env = append(slices.Clone(s.env), watchListOff)
	s.Name += ", WatchList off"
	return s
}

// restartPhase restarts a controller over the Books a phase of the same
// configuration converged: the time until it is synced (readyz 200: both
// caches synced, for ours and the tuned twin) and idle, the writes it
// makes, its peak RSS, and the API server's RSS before and at its peak
// while it starts.
func (e *env) restartPhase(ctx context.Context, live *Phase, s controllerSpec) (*Restart, error) {
	r := &Restart{Round: e.round, N: live.N, Namespace: live.Namespace, After: live.Name, Controller: s.Name,
		WatchListOff: slices.Contains(s.env, watchListOff)}
	if e.o.restartFloor {
		e.apiServerGC(ctx)
		floor, err := e.floor(ctx, live.Namespace)
		if err != nil {
			return nil, err
		}
		r.Floor = floor
	}
	r.OtherCoresBusyAtStart, r.APIServerGC = e.settle(ctx)
	serverCPU := e.apiServerCPU()
	server := e.sampleAPIServer()
	defer server.stop()
	r.APIServerRSSBeforeBytes = server.before
	pr, err := e.startController(s, live.Namespace, e.logName("restart-"+s.Config))
	if err != nil {
		return nil, err
	}
	defer func() {
		if !pr.exited() {
			pr.terminate()
		}
	}()
	if err := e.waitRestartIdle(ctx, r, pr, s); err != nil {
		return r, err
	}
	r.APIServerPeakRSSBytes = server.stop()
	if serverCPU > 0 {
		r.APIServerCPUSeconds = round(e.apiServerCPU()-serverCPU, 2)
	}
	if st, err := readProc(pr.pid); err == nil {
		r.CPUSeconds = round(st.CPUSeconds, 2)
		r.PeakRSSBytes = st.HWMBytes
	}
	return r, nil
}

// waitRestartIdle polls the restarted controller until it is idle, filling
// in r's times and counts.
func (e *env) waitRestartIdle(ctx context.Context, r *Restart, pr *proc, s controllerSpec) error {
	// The twin's counters are controller-runtime's.
	active, reconciles := "book_controller_active_workers", "book_controller_reconcile_total"
	if strings.HasPrefix(s.Config, "twin") {
		active, reconciles = "controller_runtime_active_workers", "controller_runtime_reconcile_total"
	}
	var quietSince time.Time
	lastTotal := -1.0
	deadline := time.Now().Add(e.o.timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil && !pr.exited() {
		time.Sleep(50 * time.Millisecond)
		now := time.Now()
		ready := pr.ready()
		if ready && r.SyncedSeconds == 0 {
			r.SyncedSeconds = round(now.Sub(pr.start).Seconds(), 3)
		}
		m, err := scrape(pr.metricsAddr)
		if err != nil {
			quietSince = time.Time{}
			continue
		}
		total := sumMap(m.requests())
		if !ready || m.value("workqueue_depth") != 0 || m.value(active) != 0 || total != lastTotal {
			quietSince, lastTotal = time.Time{}, total
			continue
		}
		if quietSince.IsZero() {
			quietSince = now
		}
		if now.Sub(quietSince) >= quietWindow {
			r.IdleSeconds = round(quietSince.Sub(pr.start).Seconds(), 3)
			r.QuietWindowSeconds = quietWindow.Seconds()
			r.Requests = m.requests()
			r.Writes = writes(r.Requests)
			r.Reconciles = m.value(reconciles)
			return nil
		}
	}
	return fmt.Errorf("restart of %s: not idle within %s", s.Name, e.o.timeout)
}

// serverSampler records the API server's peak RSS from /proc while a
// controller starts; the bench's own local cluster only (with -kubeconfig
// there is no process to read).
type serverSampler struct {
	before uint64
	mu     sync.Mutex
	peak   uint64
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

func (e *env) sampleAPIServer() *serverSampler {
	s := &serverSampler{done: make(chan struct{})}
	if e.cluster == nil {
		return s
	}
	pid, ok := e.cluster.Pids()[localcluster.KubeAPIServer]
	if !ok {
		return s
	}
	if st, err := readProc(pid); err == nil {
		s.before, s.peak = st.RSSBytes, st.RSSBytes
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				if st, err := readProc(pid); err == nil {
					s.mu.Lock()
					s.peak = max(s.peak, st.RSSBytes)
					s.mu.Unlock()
				}
			}
		}
	}()
	return s
}

// stop ends the sampling (once; later calls only read) and returns the
// peak seen.
func (s *serverSampler) stop() uint64 {
	s.once.Do(func() { close(s.done) })
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}
