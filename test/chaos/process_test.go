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
	"syscall"
	"testing"
	"time"

	"ydzs.io/book-controller/internal/poll"
)

// TestControllerProcessKilled runs the controller binary and SIGKILLs it at
// random moments, CHAOS_ROUNDS times: while it starts and lists, or after a
// random number of its writes. Every round brings new work first (a batch
// of new Books and new specs for some old ones), so every kill lands in the
// middle of convergence. A last process must then bring every Book to Ready
// with exactly one ConfigMap: none lost, none duplicated, none orphaned.
func TestControllerProcessKilled(t *testing.T) {
	rng := newRand(t)
	ns := env.Namespace(t)
	rounds := config.rounds
	want := map[string]spec{}
	var killedDuringStart, killedMidway int

	for r := range rounds {
		batch := workRound(t, ns, rng, want, r, rounds)

		p := startBinary(t, fmt.Sprintf("controller-%02d", r), ns)
		var how string
		if rng.IntN(3) == 0 {
			// Start-up: preflight, informers listing, caches syncing,
			// or the first writes (all within some 400ms here).
			d := time.Duration(rng.IntN(400)) * time.Millisecond
			time.Sleep(d)
			how = fmt.Sprintf("%v after start", d)
			killedDuringStart++
		} else {
			// After k writes: a ConfigMap created but not yet the status,
			// a status half-way through the batch...
			k := 1 + rng.IntN(2*batch)
			poll.Eventually(t, fmt.Sprintf("%s to log %d writes or exit", p.Name, k), pollInterval, time.Minute, func(context.Context) error {
				n := writesLogged(p)
				return poll.Done(n >= k || !p.Running(), "%d writes logged", n)
			})
			how = fmt.Sprintf("after %d writes", k)
			killedMidway++
		}
		if !p.Running() {
			t.Fatalf("round %d: the controller exited by itself:\n%s", r, p.Tail(20))
		}
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		faults.Add(1)
		t.Logf("round %d: SIGKILLed the controller %s (%d writes logged, %d Books so far)", r, how, writesLogged(p), len(want))
	}

	final := startBinary(t, "controller-final", ns)
	// The last process must itself have listed the world and started its
	// workers: the killed ones may have left nothing to do, and a SIGTERM
	// that lands before the Go runtime installs its handlers (the first
	// ~30ms) kills the process outright, which is not a shutdown to test.
	poll.Eventually(t, final.Name+" to start its workers", pollInterval, time.Minute, func(context.Context) error {
		if !final.Running() {
			t.Fatalf("%s exited by itself:\n%s", final.Name, final.Tail(20))
		}
		return poll.Done(final.CountLines(`"Starting workers"`) > 0, "no \"Starting workers\" line yet")
	})
	took := waitConverged(t, ns, expectation{want: want})
	leftover := writesLogged(final)
	if err := final.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := final.Wait(30 * time.Second); err != nil || code != 0 {
		t.Errorf("after SIGTERM the last controller exited with code %d (%v), want 0", code, err)
	}
	figure(t, "%d SIGKILLs (%d during start-up, %d mid-convergence) over %d Books; the last process finished the work left (%d writes) in %v",
		rounds, killedDuringStart, killedMidway, len(want), leftover, took.Round(100*time.Millisecond))
}
