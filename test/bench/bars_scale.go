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

import "fmt"

// scaleBars are issue 26's bars: live changes first through a restart and
// a failover (at N ≥ largeN), and one replica at 100,000 Books.
func scaleBars() []barSpec {
	le := func(x float64) func(float64) bool { return func(v float64) bool { return v <= x } }
	lt := func(x float64) func(float64) bool { return func(v float64) bool { return v < x } }
	var out []barSpec
	for _, kind := range []string{"restart", "failover"} {
		failover := kind == "failover"
		p99 := func(r *Round, config string) (float64, string, bool) {
			x := r.liveRestart(config, failover)
			if x == nil {
				return 0, "", false
			}
			return max(x.CreateP99Ms, x.EditP99Ms), fmt.Sprintf("create %.0f ms, edit %.0f ms", x.CreateP99Ms, x.EditP99Ms), true
		}
		out = append(out,
			barSpec{name: fmt.Sprintf("%s-live: ours p99 of create→Ready and edit→ConfigMap (ms)", kind), target: "≤ 1000 at N ≥ 50000",
				ok: le(1000), minN: largeN, value: func(r *Round) (float64, string, bool) { return p99(r, "ours") }},
			barSpec{name: fmt.Sprintf("%s-live: ours p99 / twin-tuned p99", kind), target: "< 1.0 at N ≥ 50000",
				ok: lt(1.0), minN: largeN, value: func(r *Round) (float64, string, bool) {
					a, fa, ok1 := p99(r, "ours")
					b, fb, ok2 := p99(r, "twin-tuned")
					if !ok1 || !ok2 || b == 0 {
						return 0, "", false
					}
					return a / b, fa + " vs " + fb, true
				}},
			// The backfill is the queue's work, from the caches' sync (the
			// Lease taken) to idle: the list and the Lease wait before it run
			// the same code in both, and the wait alone varies by seconds
			// (the standby's 2 s retry period and its jitter).
			barSpec{name: fmt.Sprintf("%s-live: ours backfill / arrival order's (%s to idle)", kind, syncedWord(failover)), target: "≤ 1.1 at N ≥ 50000",
				ok: le(1.1), minN: largeN, value: func(r *Round) (float64, string, bool) {
					a, b := r.liveRestart("ours", failover), r.liveRestart("ours-fifo", failover)
					if a == nil || b == nil || b.IdleSeconds <= b.SyncedSeconds {
						return 0, "", false
					}
					return (a.IdleSeconds - a.SyncedSeconds) / (b.IdleSeconds - b.SyncedSeconds),
						fmt.Sprintf("%.2f s vs %.2f s (idle after %.2f s vs %.2f s)", a.IdleSeconds-a.SyncedSeconds, b.IdleSeconds-b.SyncedSeconds, a.IdleSeconds, b.IdleSeconds), true
				}},
			barSpec{name: fmt.Sprintf("%s-live: converged objects ours wrote", kind), target: "= 0 in every round",
				ok: le(0), everyRound: true, value: func(r *Round) (float64, string, bool) {
					x := r.liveRestart("ours", failover)
					if x == nil {
						return 0, "", false
					}
					return float64(x.UntouchedWritten), fmt.Sprintf("of %d Books and their ConfigMaps, %d edited", x.N, x.Edits), true
				}},
		)
	}
	return append(out,
		barSpec{name: "ours / twin-tuned (peak RSS, backlog) at 100,000", target: "≤ 0.7 at N ≥ 100000", ok: le(0.7), minN: 100000,
			value: func(r *Round) (float64, string, bool) {
				a, b := r.phase("ours-backlog"), r.phase("twin-tuned-backlog")
				if a == nil || b == nil || b.PeakRSSBytes == 0 {
					return 0, "", false
				}
				return float64(a.PeakRSSBytes) / float64(b.PeakRSSBytes), mib(a.PeakRSSBytes) + " vs " + mib(b.PeakRSSBytes), true
			}},
		barSpec{name: "restart over converged Books: idle after (s)", target: "≤ 15 at N ≥ 100000", ok: le(15), minN: 100000,
			value: func(r *Round) (float64, string, bool) {
				if r.Restart == nil {
					return 0, "", false
				}
				figures := fmt.Sprintf("synced after %.2f s, %.0f writes", r.Restart.SyncedSeconds, r.Restart.Writes)
				if f := r.Restart.Floor; f != nil {
					figures += fmt.Sprintf("; the API server's floor %.2f s", f.Seconds)
				}
				return r.Restart.IdleSeconds, figures, true
			}},
	)
}

// liveRestart is the round's restart-live (or failover-live) run of config.
func (r *Round) liveRestart(config string, failover bool) *LiveRestart {
	for _, x := range r.LiveRestarts {
		if x.Config == config && x.Failover == failover {
			return x
		}
	}
	return nil
}
