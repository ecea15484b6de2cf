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
	"slices"
	"time"
)

// This file is the soak's judgement, kept free of clusters and processes so
// that its unit tests (analysis_test.go, run by make test) can feed it
// series that must pass and series that must fail.

// Sample is one scrape of one replica's /metrics.
type Sample struct {
	// At is the time since the churn started.
	At time.Duration
	// Slot is the replica's place ("a", "b"); Gen counts the processes that
	// held it (a process killed and started again is the next Gen).
	Slot string
	Gen  int
	// Started is when the process started, since the churn started
	// (negative for the processes started before it).
	Started time.Duration
	// Leader is leader_election_master_status.
	Leader bool
	// Heap is go_memstats_heap_inuse_bytes, Goroutines go_goroutines, FDs
	// process_open_fds and Depth workqueue_depth{name="book"}.
	Heap, Goroutines, FDs, Depth float64
}

// Fault is one injected fault, from its start to the moment it was over
// (the API server answering again, a standby holding the Lease).
type Fault struct {
	Kind    string
	At, End time.Duration
}

// Limits are what the soak tolerates.
type Limits struct {
	// Warmup: samples before it (since the churn started) are not judged;
	// nor those of a process before ProcessWarmup since it started: one
	// started mid-run joins a warm cluster and only fills its caches, and
	// a longer wait would leave it too little time before the next leader
	// kill.
	Warmup, ProcessWarmup time.Duration
	// MinSpan is the shortest stretch of one process in one role that is
	// judged; a shorter one gives no meaningful slope.
	MinSpan time.Duration
	// HeapSlope (bytes per minute), GoroutineSlope and FDSlope (per minute)
	// are the largest least-squares slopes allowed.
	HeapSlope, GoroutineSlope, FDSlope float64
	// HeapSettle (bytes) is a rise of the heap's floor over a stretch that
	// is allowed whatever its slope: a process settling into a role (a new
	// leader's workers and write buffers) rises by a few MiB, which over a
	// short run's 2-minute stretch is a steep slope and no leak. The limit
	// on a stretch is thus max(HeapSlope, HeapSettle / its span).
	HeapSettle float64
	// FloorWindow: the heap's slope is fitted to its floor, the smallest
	// sample of each window of this length, since heap in use swings with
	// every GC cycle and its floor is the live heap a leak raises.
	FloorWindow time.Duration
	// GoroutineReturn: within ReturnWindow after each fault, the goroutines
	// must come back to at most their baseline plus this.
	GoroutineReturn float64
	ReturnWindow    time.Duration
	// FDFinal: the open FDs at the end of a stretch are at most its
	// baseline plus this.
	FDFinal float64
}

// DefaultLimits are the soak's limits for a run of the given duration;
// docs/operations.md#soak says why each is what it is.
func DefaultLimits(duration time.Duration) Limits {
	return Limits{
		Warmup:        Warmup(duration),
		ProcessWarmup: min(Warmup(duration), 2*time.Minute),
		// A short run's survivor leads for little more than a fifth of it
		// after the warm-up and the takeover.
		MinSpan:         min(Warmup(duration), duration/5),
		HeapSlope:       1 << 20,
		HeapSettle:      4 << 20,
		GoroutineSlope:  1,
		FDSlope:         0.5,
		FloorWindow:     min(time.Minute, duration/10),
		GoroutineReturn: 10,
		ReturnWindow:    2 * time.Minute,
		FDFinal:         10,
	}
}

// Warmup is 5 minutes for runs of 15 minutes or more, else a third of the
// run: long enough for the caches to fill and the first takeovers' backlog
// to drain, short enough to leave most of a short run to judge.
func Warmup(duration time.Duration) time.Duration {
	if duration >= 15*time.Minute {
		return 5 * time.Minute
	}
	return duration / 3
}

// Slope is the least-squares slope of ys over xs; ok is false with fewer
// than two distinct xs.
func Slope(xs, ys []float64) (slope float64, ok bool) {
	n := float64(len(xs))
	if len(xs) < 2 || len(xs) != len(ys) {
		return 0, false
	}
	var sx, sy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
	}
	mx, my := sx/n, sy/n
	var sxx, sxy float64
	for i := range xs {
		dx := xs[i] - mx
		sxx += dx * dx
		sxy += dx * (ys[i] - my)
	}
	if sxx == 0 {
		return 0, false
	}
	return sxy / sxx, true
}

// Stretch is the judged samples of one process in one role (leader or
// standby): a takeover adds workers and their goroutines, so each role has
// a baseline of its own.
type Stretch struct {
	Slot    string
	Gen     int
	Leader  bool
	Samples []Sample
}

// Name is "a#0 leader".
func (s Stretch) Name() string {
	role := "standby"
	if s.Leader {
		role = "leader"
	}
	return fmt.Sprintf("%s#%d %s", s.Slot, s.Gen, role)
}

// Span is the time from the stretch's first sample to its last.
func (s Stretch) Span() time.Duration {
	if len(s.Samples) == 0 {
		return 0
	}
	return s.Samples[len(s.Samples)-1].At - s.Samples[0].At
}

// Stretches cuts the samples taken before end into stretches: the samples
// of one process after the warm-up (counted from the churn's start) and
// after its own (from the process's start), split where its role changes. They are sorted by
// slot, generation and time.
func Stretches(samples []Sample, warmup, processWarmup, end time.Duration) []Stretch {
	s := slices.Clone(samples)
	slices.SortStableFunc(s, func(a, b Sample) int {
		if a.Slot != b.Slot {
			if a.Slot < b.Slot {
				return -1
			}
			return 1
		}
		if a.Gen != b.Gen {
			return a.Gen - b.Gen
		}
		return int(a.At - b.At)
	})
	var out []Stretch
	for _, x := range s {
		if x.At > end || x.At < warmup || x.At < x.Started+processWarmup {
			continue
		}
		if n := len(out); n > 0 {
			last := &out[n-1]
			if last.Slot == x.Slot && last.Gen == x.Gen && last.Leader == x.Leader {
				last.Samples = append(last.Samples, x)
				continue
			}
		}
		out = append(out, Stretch{Slot: x.Slot, Gen: x.Gen, Leader: x.Leader, Samples: []Sample{x}})
	}
	return out
}

// Verdict of one stretch.
type StretchReport struct {
	Name     string
	From, To time.Duration
	// Judged is false for a stretch shorter than Limits.MinSpan.
	Judged bool
	// Slopes per minute (heap in bytes, of its floor).
	HeapSlope, GoroutineSlope, FDSlope float64
	// Baselines: the median of the first minute's samples.
	HeapBase, GoroutineBase, FDBase float64
	FDLast                          float64
	// Returns counts the faults after which the goroutines were checked,
	// and Problems says what broke a limit.
	Returns  int
	Problems []string
}

// Report is the verdict over every stretch.
type Report struct {
	Stretches []StretchReport
	// Judged counts the stretches long enough to judge; Returns the
	// (stretch, fault) pairs whose goroutines were checked.
	Judged, Returns int
	Problems        []string
}

// Pass is true when something was judged and nothing broke a limit.
func (r Report) Pass() bool { return r.Judged > 0 && len(r.Problems) == 0 }

// Analyze judges the samples taken before end against l.
func Analyze(samples []Sample, faults []Fault, end time.Duration, l Limits) Report {
	var r Report
	for _, st := range Stretches(samples, l.Warmup, l.ProcessWarmup, end) {
		sr := judge(st, faults, l)
		if sr.Judged {
			r.Judged++
			r.Returns += sr.Returns
		}
		for _, p := range sr.Problems {
			r.Problems = append(r.Problems, sr.Name+": "+p)
		}
		r.Stretches = append(r.Stretches, sr)
	}
	if r.Judged == 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("no process stayed in one role for %v after the warm-up: nothing to judge", l.MinSpan))
	}
	return r
}

func judge(st Stretch, faults []Fault, l Limits) StretchReport {
	ss := st.Samples
	sr := StretchReport{Name: st.Name(), From: ss[0].At, To: ss[len(ss)-1].At}
	if st.Span() < l.MinSpan {
		return sr
	}
	sr.Judged = true
	first := ss[0].At
	var mins, gs, fds, hs []float64
	for _, x := range ss {
		mins = append(mins, x.At.Minutes())
		gs = append(gs, x.Goroutines)
		fds = append(fds, x.FDs)
		hs = append(hs, x.Heap)
	}
	fx, fy := Floor(mins, hs, l.FloorWindow.Minutes())
	sr.HeapSlope, _ = Slope(fx, fy)
	sr.GoroutineSlope, _ = Slope(mins, gs)
	sr.FDSlope, _ = Slope(mins, fds)
	var head []Sample
	for _, x := range ss {
		if x.At-first <= time.Minute {
			head = append(head, x)
		}
	}
	sr.HeapBase = median(head, func(x Sample) float64 { return x.Heap })
	sr.GoroutineBase = median(head, func(x Sample) float64 { return x.Goroutines })
	sr.FDBase = median(head, func(x Sample) float64 { return x.FDs })
	sr.FDLast = ss[len(ss)-1].FDs

	if limit := max(l.HeapSlope, l.HeapSettle/st.Span().Minutes()); sr.HeapSlope > limit {
		sr.Problems = append(sr.Problems, fmt.Sprintf("heap floor grows %.2f MiB/min (limit %.2f over %v)", sr.HeapSlope/(1<<20), limit/(1<<20), st.Span()))
	}
	if sr.GoroutineSlope > l.GoroutineSlope {
		sr.Problems = append(sr.Problems, fmt.Sprintf("goroutines grow %.2f/min (limit %.2f)", sr.GoroutineSlope, l.GoroutineSlope))
	}
	if sr.FDSlope > l.FDSlope {
		sr.Problems = append(sr.Problems, fmt.Sprintf("open FDs grow %.2f/min (limit %.2f)", sr.FDSlope, l.FDSlope))
	}
	if sr.FDLast > sr.FDBase+l.FDFinal {
		sr.Problems = append(sr.Problems, fmt.Sprintf("%.0f open FDs at the end, baseline %.0f (limit +%.0f)", sr.FDLast, sr.FDBase, l.FDFinal))
	}
	for _, f := range faults {
		// Only faults the stretch lived through from its baseline on, and
		// that it outlived: after the fault's end there are samples to
		// look at.
		if f.At < first {
			continue
		}
		var after []Sample
		for _, x := range ss {
			if x.At > f.End && x.At <= f.End+l.ReturnWindow {
				after = append(after, x)
			}
		}
		if len(after) == 0 {
			continue
		}
		sr.Returns++
		if !slices.ContainsFunc(after, func(x Sample) bool { return x.Goroutines <= sr.GoroutineBase+l.GoroutineReturn }) {
			lowest := slices.MinFunc(after, func(a, b Sample) int { return int(a.Goroutines - b.Goroutines) })
			sr.Problems = append(sr.Problems, fmt.Sprintf("goroutines did not come back within %v after the %s at %v: at least %.0f, baseline %.0f (limit +%.0f)",
				l.ReturnWindow, f.Kind, f.At.Round(time.Second), lowest.Goroutines, sr.GoroutineBase, l.GoroutineReturn))
		}
	}
	return sr
}

// Floor returns, for each window of the given width along xs (sorted),
// the x and y of the window's smallest y; a last window less than half
// covered is left out.
func Floor(xs, ys []float64, width float64) (fx, fy []float64) {
	if len(xs) == 0 {
		return nil, nil
	}
	start := xs[0]
	best := -1
	flush := func() {
		if best >= 0 {
			fx, fy = append(fx, xs[best]), append(fy, ys[best])
		}
	}
	for i := range xs {
		for xs[i] >= start+width {
			flush()
			best = -1
			start += width
		}
		if best < 0 || ys[i] < ys[best] {
			best = i
		}
	}
	// A last window less than half full likely missed the GC's trough:
	// its "floor" would be a peak of the sawtooth.
	if xs[len(xs)-1]-start >= width/2 {
		flush()
	}
	return fx, fy
}

func median(ss []Sample, f func(Sample) float64) float64 {
	if len(ss) == 0 {
		return math.NaN()
	}
	v := make([]float64, len(ss))
	for i, x := range ss {
		v[i] = f(x)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
