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

package soak

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestSlope(t *testing.T) {
	for _, tc := range []struct {
		name   string
		xs, ys []float64
		want   float64
		ok     bool
	}{
		{"rising line", []float64{0, 1, 2, 3}, []float64{5, 7, 9, 11}, 2, true},
		{"flat", []float64{0, 1, 2}, []float64{4, 4, 4}, 0, true},
		{"falling", []float64{0, 2, 4}, []float64{10, 9, 8}, -0.5, true},
		// Least squares, not the ends: a spike in the middle moves no slope.
		{"spike in the middle", []float64{0, 1, 2, 3, 4}, []float64{1, 1, 9, 1, 1}, 0, true},
		{"one point", []float64{1}, []float64{1}, 0, false},
		{"one x", []float64{2, 2}, []float64{1, 3}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Slope(tc.xs, tc.ys)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("Slope = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestPooledSlope(t *testing.T) {
	// Two segments rising 1 per x, the second 10 higher: the step between
	// them moves no slope.
	got, sxx, ok := PooledSlope([][]float64{{0, 1, 2}, {5, 6, 7}}, [][]float64{{0, 1, 2}, {15, 16, 17}})
	if !ok || math.Abs(got-1) > 1e-9 || sxx != 4 {
		t.Errorf("PooledSlope over a step = %v, %v, %v; want 1, 4, true", got, sxx, ok)
	}
	// Segments of one point give nothing to fit.
	if _, _, ok := PooledSlope([][]float64{{0}, {5}}, [][]float64{{0}, {15}}); ok {
		t.Errorf("PooledSlope of single points: ok")
	}
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWarmup(t *testing.T) {
	for d, want := range map[time.Duration]time.Duration{
		5 * time.Minute:  100 * time.Second,
		14 * time.Minute: 14 * time.Minute / 3,
		15 * time.Minute: 5 * time.Minute,
		2 * time.Hour:    5 * time.Minute,
	} {
		if got := Warmup(d); got != want {
			t.Errorf("Warmup(%v) = %v, want %v", d, got, want)
		}
	}
	// A 5-minute run judges its survivor's 2 minutes of leadership after
	// the takeover.
	if l := DefaultLimits(5 * time.Minute); l.MinSpan != time.Minute {
		t.Errorf("DefaultLimits(5m): MinSpan %v, want 1m", l.MinSpan)
	}
	if l := DefaultLimits(30 * time.Minute); l.MinSpan != 5*time.Minute {
		t.Errorf("DefaultLimits(30m): MinSpan %v, want 5m", l.MinSpan)
	}
}

// series makes the samples of one process every 10 s from..to, with the
// heap (sawtooth over a floor), goroutines and FDs given as functions of
// the minute.
func series(slot string, gen int, started, from, to time.Duration, leader func(time.Duration) bool,
	heap, goroutines, fds func(m float64) float64) []Sample {
	return seriesEvery(10*time.Second, slot, gen, started, from, to, leader, heap, goroutines, fds)
}

// seriesEvery is series scraped every given period.
func seriesEvery(every time.Duration, slot string, gen int, started, from, to time.Duration, leader func(time.Duration) bool,
	heap, goroutines, fds func(m float64) float64) []Sample {
	var out []Sample
	for at := from; at <= to; at += every {
		m := at.Minutes()
		out = append(out, Sample{At: at, Slot: slot, Gen: gen, Started: started, Leader: leader(at),
			Heap: heap(m), Goroutines: goroutines(m), FDs: fds(m)})
	}
	return out
}

func always(bool) func(time.Duration) bool { return func(time.Duration) bool { return true } }

// sawtooth is a heap of floor MiB that grows by 20 MiB between GCs, one
// every 30 s, as heap in use does under load.
func sawtooth(floor func(m float64) float64) func(m float64) float64 {
	return func(m float64) float64 {
		phase := math.Mod(m*60, 30) / 30
		return (floor(m) + 20*phase) * (1 << 20)
	}
}

func flat(v float64) func(float64) float64 { return func(float64) float64 { return v } }

var testLimits = DefaultLimits(30 * time.Minute)

func TestAnalyzeFlatPasses(t *testing.T) {
	s := series("a", 0, -time.Minute, 0, 30*time.Minute, always(true), sawtooth(flat(40)), flat(120), flat(30))
	r := Analyze(s, nil, 30*time.Minute, testLimits)
	if !r.Pass() || r.Judged != 1 {
		t.Fatalf("flat series: Pass=%v judged=%d problems=%v", r.Pass(), r.Judged, r.Problems)
	}
	if st := r.Stretches[0]; st.GoroutineBase != 120 || st.FDBase != 30 {
		t.Errorf("stretch = %+v", st)
	}
	if h := r.Heaps[0]; !h.Judged || math.Abs(h.Slope) > 0.05*(1<<20) || h.Segments != 1 {
		t.Errorf("heap = %+v", h)
	}
	if st := r.Stretches[0]; st.From != 5*time.Minute {
		t.Errorf("judged from %v, want the warm-up's end, 5m", st.From)
	}
}

func TestAnalyzeGrowthFails(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		heap, goroutines, fd func(float64) float64
		want                 string
	}{
		// 2 MiB a minute under a 20 MiB sawtooth: the fit shows it.
		{"heap", sawtooth(func(m float64) float64 { return 40 + 2*m }), flat(120), flat(30), "heap grows"},
		{"goroutines", sawtooth(flat(40)), func(m float64) float64 { return 120 + 2*m }, flat(30), "goroutines grow"},
		{"fds", sawtooth(flat(40)), flat(120), func(m float64) float64 { return 30 + m }, "open FDs grow"},
		// A step, not a slope: 15 FDs left open once, at minute 20.
		{"fd step", sawtooth(flat(40)), flat(120), func(m float64) float64 { return 30 + 15*step(m, 20) }, "open FDs at the end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := series("a", 0, -time.Minute, 0, 30*time.Minute, always(true), tc.heap, tc.goroutines, tc.fd)
			r := Analyze(s, nil, 30*time.Minute, testLimits)
			if r.Pass() || !strings.Contains(strings.Join(r.Problems, "\n"), tc.want) {
				t.Errorf("Pass=%v, problems %q; want one saying %q", r.Pass(), r.Problems, tc.want)
			}
		})
	}
}

func step(m, at float64) float64 {
	if m >= at {
		return 1
	}
	return 0
}

func TestGoroutinesReturnAfterFault(t *testing.T) {
	fault := []Fault{{Kind: "apiserver-restart", At: 10 * time.Minute, End: 10*time.Minute + 20*time.Second}}
	// 60 extra goroutines while the API server is down and retried
	// watches pile up, gone 30 s after it is back: passes.
	back := func(m float64) float64 {
		if m >= 10 && m < 10.85 {
			return 180
		}
		return 120
	}
	r := Analyze(series("a", 0, -time.Minute, 0, 30*time.Minute, always(true), sawtooth(flat(40)), back, flat(30)),
		fault, 30*time.Minute, testLimits)
	if !r.Pass() || r.Returns != 1 {
		t.Errorf("goroutines that came back: Pass=%v returns=%d problems=%v", r.Pass(), r.Returns, r.Problems)
	}
	// 40 goroutines left behind by the fault for good (each one a watch
	// that is never stopped): fails, though such a step is no slope.
	stuck := func(m float64) float64 { return 120 + 40*step(m, 10) }
	r = Analyze(series("a", 0, -time.Minute, 0, 30*time.Minute, always(true), sawtooth(flat(40)), stuck, flat(30)),
		fault, 30*time.Minute, testLimits)
	if r.Pass() || !strings.Contains(strings.Join(r.Problems, "\n"), "did not come back") {
		t.Errorf("goroutines left behind: Pass=%v problems=%v", r.Pass(), r.Problems)
	}
}

// A takeover adds the workers' goroutines: the standby and the leader are
// judged apart, each against its own baseline, and the fault that made the
// standby leader is no fault of the new leader's stretch.
func TestStretchesSplitByRoleAndProcess(t *testing.T) {
	leaderFrom := func(at time.Duration) func(time.Duration) bool {
		return func(x time.Duration) bool { return x >= at }
	}
	goroutines := func(m float64) float64 { return 100 + 20*step(m, 15) }
	s := series("b", 0, -time.Minute, 0, 30*time.Minute, leaderFrom(15*time.Minute), sawtooth(flat(40)), goroutines, flat(30))
	// a#0 killed at 15m, a#1 started then.
	s = append(s, series("a", 0, -time.Minute, 0, 15*time.Minute, always(true), sawtooth(flat(40)), flat(120), flat(30))...)
	s = append(s, series("a", 1, 15*time.Minute, 15*time.Minute+10*time.Second, 30*time.Minute, leaderFrom(time.Hour), sawtooth(flat(40)), flat(100), flat(30))...)
	faults := []Fault{{Kind: "leader-kill", At: 15 * time.Minute, End: 15*time.Minute + 25*time.Second}}
	r := Analyze(s, faults, 30*time.Minute, testLimits)
	var names []string
	for _, st := range r.Stretches {
		names = append(names, st.Name)
	}
	if got, want := strings.Join(names, ", "), "a#0 leader, a#1 standby, b#0 standby, b#0 leader"; got != want {
		t.Errorf("stretches %s, want %s", got, want)
	}
	if !r.Pass() || r.Judged != 4 {
		t.Errorf("Pass=%v judged=%d problems=%v", r.Pass(), r.Judged, r.Problems)
	}
	if r.Stretches[1].From != 17*time.Minute {
		t.Errorf("a#1 judged from %v, want 2 minutes after its start, 17m", r.Stretches[1].From)
	}
	if r.Stretches[3].GoroutineBase != 120 {
		t.Errorf("b#0 leader's baseline %v, want 120", r.Stretches[3].GoroutineBase)
	}
}

// fiveMinuteRun is the shape of a real 5-minute soak (the CI's): a#0
// leads until SIGKILLed at 2m31s, b#0 stands by and leads from 3m7s, a#1
// stands by from 3m8s; the API server restarts at 1m15s and 3m50s; a
// scrape every 5 s. heap(slot, m) is the heap's settled level in MiB.
// Each scrape adds up to noise MiB, drawn from the seed: under the soak's
// churn a GC cycle takes a few seconds, and a scrape lands anywhere in it.
func fiveMinuteRun(seed uint64, noise float64, heap func(slot string, m float64) float64) ([]Sample, []Fault) {
	rng := rand.New(rand.NewPCG(seed, seed))
	faults := []Fault{
		{Kind: "apiserver-restart", At: 75 * time.Second, End: 78 * time.Second},
		{Kind: "leader-kill", At: 151 * time.Second, End: 187 * time.Second},
		{Kind: "apiserver-restart", At: 230 * time.Second, End: 233 * time.Second},
	}
	scrape := func(slot string) func(float64) float64 {
		return func(m float64) float64 {
			return (heap(slot, m) + noise*rng.Float64()) * (1 << 20)
		}
	}
	byRole := func(leader, standby float64, from time.Duration) func(float64) float64 {
		return func(m float64) float64 {
			if m >= from.Minutes() {
				return leader
			}
			return standby
		}
	}
	leaderFrom := func(at time.Duration) func(time.Duration) bool {
		return func(x time.Duration) bool { return x >= at }
	}
	const every = 5 * time.Second
	s := seriesEvery(every, "a", 0, -22*time.Second, 10*time.Second, 150*time.Second, always(true), scrape("a"), flat(215), flat(20))
	s = append(s, seriesEvery(every, "b", 0, -22*time.Second, 10*time.Second, 300*time.Second, leaderFrom(190*time.Second), scrape("b"),
		byRole(215, 60, 190*time.Second), byRole(20, 16, 190*time.Second))...)
	s = append(s, seriesEvery(every, "a", 1, 188*time.Second, 190*time.Second, 300*time.Second, leaderFrom(time.Hour), scrape("a"), flat(60), flat(16))...)
	return s, faults
}

// The heaps of a 5-minute run, in MiB.
var (
	// A steady leak of 2 MiB/min in every process: 7 MiB over the
	// survivor's judged 3m20s, under 4 MiB over its 1m50s of leadership,
	// which the earlier rule (4 MiB over a stretch's span, 2.18 MiB/min
	// over 1m50s) let pass.
	leak2 = func(_ string, m float64) float64 { return 16 + 2*m }
	// The relist after the API server restart at 3m50s settles 8 MiB
	// higher, for good: a step, no slope.
	stepAfterFault = func(_ string, m float64) float64 { return 16 + 8*step(m, 233.0/60) }
	// The CI run that failed with "heap floor grows 2.41 MiB/min (limit
	// 2.18 over 1m50s)": the new leader's stretch (1m50s) starts with its
	// heap settling 4.5 MiB higher over the 20 s after the takeover, then
	// flat; the relist after the restart adds nothing.
	ciFailure = func(slot string, m float64) float64 {
		if slot == "b" && m >= 187.0/60 {
			return 16 + 4.5*min(1, (m-187.0/60)*3)
		}
		return 16
	}
	// Steps after the takeover and after the restart over a leak.
	stepsOverLeak = func(_ string, m float64) float64 { return 16 + 2*m + 4*step(m, 190.0/60) + 3*step(m, 233.0/60) }
)

// The shapes alone (no scrape noise): a steady leak fails, one-time
// steps after a fault or a takeover pass.
func TestHeapStepsAndLeaksInAFiveMinuteRun(t *testing.T) {
	l := DefaultLimits(5 * time.Minute)
	for _, tc := range []struct {
		name string
		heap func(slot string, m float64) float64
		pass bool
	}{
		{"steady leak of 2 MiB/min", leak2, false},
		{"step of 8 MiB after a fault", stepAfterFault, true},
		{"CI failure: step at a 1m50s stretch's start", ciFailure, true},
		{"steps over a leak", stepsOverLeak, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, faults := fiveMinuteRun(0, 0, tc.heap)
			r := Analyze(s, faults, 300*time.Second, l)
			if r.Pass() != tc.pass || r.HeapJudged != 1 {
				t.Errorf("Pass=%v, want %v; heaps judged %d, want 1 (b#0); problems %q; heaps %s", r.Pass(), tc.pass, r.HeapJudged, r.Problems, heaps(r))
			}
			if !tc.pass && !strings.Contains(strings.Join(r.Problems, "\n"), "b#0: heap grows 2.00 MiB/min") {
				t.Errorf("problems %q, want b#0's heap growing 2.00 MiB/min", r.Problems)
			}
		})
	}
}

// With scrape noise: over many draws of where the scrapes fall in the GC
// cycles, one-time steps rarely fail and a leak of 2 MiB/min mostly
// does. The noise, up to 3.5 MiB (a spread of 1 MiB), is the most
// measured about the settled level of four real 5- and 15-minute runs
// (0.4 to 1.0 MiB).
func TestHeapVerdictsUnderScrapeNoise(t *testing.T) {
	l := DefaultLimits(5 * time.Minute)
	const draws = 400
	for _, tc := range []struct {
		name     string
		heap     func(slot string, m float64) float64
		minFails float64 // the least share of draws that must fail
		maxFails float64 // the largest share that may
	}{
		{"flat", func(string, float64) float64 { return 16 }, 0, 0.05},
		{"step of 8 MiB after a fault", stepAfterFault, 0, 0.05},
		{"CI failure", ciFailure, 0, 0.05},
		{"steady leak of 2 MiB/min", leak2, 0.6, 1},
		{"steady leak of 4 MiB/min", func(_ string, m float64) float64 { return 16 + 4*m }, 0.99, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fails := 0
			for seed := range uint64(draws) {
				s, faults := fiveMinuteRun(seed, 3.5, tc.heap)
				if !Analyze(s, faults, 300*time.Second, l).Pass() {
					fails++
				}
			}
			share := float64(fails) / draws
			t.Logf("%s: %.1f %% of %d draws fail", tc.name, 100*share, draws)
			if share < tc.minFails || share > tc.maxFails {
				t.Errorf("%.1f %% of draws fail, want %.0f–%.0f %%", 100*share, 100*tc.minFails, 100*tc.maxFails)
			}
		})
	}
}

func heaps(r Report) string {
	var hs []string
	for _, h := range r.Heaps {
		hs = append(hs, fmt.Sprintf("%s judged=%v %+.2f MiB/min (limit %.2f) over %d segments (%v)", h.Name, h.Judged, h.Slope/(1<<20), h.Limit/(1<<20), h.Segments, h.Fit))
	}
	return strings.Join(hs, "; ")
}

// Steps that pile up, one per API server restart, fail however flat the
// heap is between them.
func TestHeapStaircaseFails(t *testing.T) {
	var faults []Fault
	for at := 6 * time.Minute; at < 30*time.Minute; at += 2 * time.Minute {
		faults = append(faults, Fault{Kind: "apiserver-restart", At: at, End: at + 5*time.Second})
	}
	stairs := func(m float64) float64 {
		n := 0.0
		for _, f := range faults {
			n += step(m, (f.End + 10*time.Second).Minutes())
		}
		return 40 + 4*n
	}
	r := Analyze(series("a", 0, -time.Minute, 0, 30*time.Minute, always(true), sawtooth(stairs), flat(120), flat(30)), faults, 30*time.Minute, testLimits)
	if r.Pass() || !strings.Contains(strings.Join(r.Problems, "\n"), "heap floor rises") {
		t.Errorf("12 steps of 4 MiB: Pass=%v, problems %q", r.Pass(), r.Problems)
	}
}

func TestNothingJudgedFails(t *testing.T) {
	// Every process killed before it lived the minimum span past warm-up.
	s := series("a", 0, -time.Minute, 0, 7*time.Minute, always(true), sawtooth(flat(40)), flat(120), flat(30))
	r := Analyze(s, nil, 30*time.Minute, testLimits)
	if r.Pass() || r.Judged != 0 {
		t.Errorf("Pass=%v judged=%d", r.Pass(), r.Judged)
	}
}

// Samples after the churn's end (the quiet wait for convergence, when the
// heap shrinks) are not judged.
func TestSamplesAfterEndIgnored(t *testing.T) {
	heap := sawtooth(func(m float64) float64 { return 40 + 30*step(m, 30) })
	s := series("a", 0, -time.Minute, 0, 35*time.Minute, always(true), heap, flat(120), flat(30))
	r := Analyze(s, nil, 30*time.Minute-time.Second, testLimits)
	if !r.Pass() || r.Stretches[0].To > 30*time.Minute {
		t.Errorf("Pass=%v to=%v problems=%v", r.Pass(), r.Stretches[0].To, r.Problems)
	}
}
