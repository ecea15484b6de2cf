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
	"math"
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

func TestFloor(t *testing.T) {
	xs := []float64{0, 0.5, 1, 1.5, 2, 2.5}
	ys := []float64{5, 3, 8, 4, 6, 7}
	fx, fy := Floor(xs, ys, 1)
	if want := []float64{0.5, 1.5, 2}; !equal(fx, want) {
		t.Errorf("floor xs = %v, want %v", fx, want)
	}
	if want := []float64{3, 4, 6}; !equal(fy, want) {
		t.Errorf("floor ys = %v, want %v", fy, want)
	}
	// A last window with one sample at its start is left out.
	fx, _ = Floor(append(xs, 3), append(ys, 1), 1)
	if want := []float64{0.5, 1.5, 2}; !equal(fx, want) {
		t.Errorf("floor xs with a lone last sample = %v, want %v", fx, want)
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
	// the takeover, on a floor of 30 s windows.
	if l := DefaultLimits(5 * time.Minute); l.MinSpan != time.Minute || l.FloorWindow != 30*time.Second {
		t.Errorf("DefaultLimits(5m): MinSpan %v, FloorWindow %v; want 1m, 30s", l.MinSpan, l.FloorWindow)
	}
	if l := DefaultLimits(30 * time.Minute); l.MinSpan != 5*time.Minute || l.FloorWindow != time.Minute {
		t.Errorf("DefaultLimits(30m): MinSpan %v, FloorWindow %v; want 5m, 1m", l.MinSpan, l.FloorWindow)
	}
}

// series makes the samples of one process every 10 s from..to, with the
// heap (sawtooth over a floor), goroutines and FDs given as functions of
// the minute.
func series(slot string, gen int, started, from, to time.Duration, leader func(time.Duration) bool,
	heap, goroutines, fds func(m float64) float64) []Sample {
	var out []Sample
	for at := from; at <= to; at += 10 * time.Second {
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
	if st := r.Stretches[0]; math.Abs(st.HeapSlope) > 0.01*(1<<20) || st.GoroutineBase != 120 || st.FDBase != 30 {
		t.Errorf("stretch = %+v", st)
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
		// 2 MiB a minute under a 20 MiB sawtooth: the floor shows it.
		{"heap", sawtooth(func(m float64) float64 { return 40 + 2*m }), flat(120), flat(30), "heap floor grows"},
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

// A short stretch may settle by HeapSettle (4 MiB) whatever its slope; a
// long one may not grow by more than HeapSlope a minute.
func TestHeapSettleOnShortStretches(t *testing.T) {
	l := DefaultLimits(5 * time.Minute)
	// 2 minutes of leadership whose floor rises 3 MiB: 1.5 MiB/min, within
	// the 2 MiB/min that 4 MiB over 2 minutes allows.
	settle := series("a", 0, -time.Minute, 100*time.Second, 220*time.Second, always(true),
		sawtooth(func(m float64) float64 { return 18 + 1.5*(m-100.0/60) }), flat(170), flat(18))
	if r := Analyze(settle, nil, 5*time.Minute, l); !r.Pass() {
		t.Errorf("settling 3 MiB in 2 minutes: problems %v", r.Problems)
	}
	// 8 MiB over the same 2 minutes: fails.
	grow := series("a", 0, -time.Minute, 100*time.Second, 220*time.Second, always(true),
		sawtooth(func(m float64) float64 { return 18 + 4*(m-100.0/60) }), flat(170), flat(18))
	if r := Analyze(grow, nil, 5*time.Minute, l); r.Pass() {
		t.Errorf("growing 8 MiB in 2 minutes passed")
	}
	// 1.5 MiB/min over 25 minutes is no settling: fails.
	long := series("a", 0, -time.Minute, 0, 30*time.Minute, always(true),
		sawtooth(func(m float64) float64 { return 18 + 1.5*m }), flat(170), flat(18))
	if r := Analyze(long, nil, 30*time.Minute, testLimits); r.Pass() {
		t.Errorf("growing 1.5 MiB/min for 25 minutes passed")
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
