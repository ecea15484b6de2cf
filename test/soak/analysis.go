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
	// judged, and the least time a process's settled heap segments must
	// span in all for its heap to be judged; a shorter one gives no
	// meaningful slope.
	MinSpan time.Duration
	// HeapSlope (bytes per minute), GoroutineSlope and FDSlope (per minute)
	// are the largest least-squares slopes allowed. The heap's is judged
	// per process, once settled: see HeapSettle and HeapNoise.
	HeapSlope, GoroutineSlope, FDSlope float64
	// HeapSettle: the heap is judged over a process's whole judged life
	// (all its stretches), but not from a fault's start until HeapSettle
	// after its end, nor for HeapSettle after the process took a role. A
	// relist after an API server restart, or a new leader's workers and
	// write buffers, raise the heap by a few MiB once: a step to a new
	// level and no leak, yet over a short run's 2-minute stretch a steep
	// slope; a standby's heap may rise while the leader is dead, too.
	// Each spike after a restart measured was over within 7 s. The settled
	// samples fall into segments, one between two such events, and one
	// slope is fitted to all the segments at once, each at a level of its
	// own (the pooled within-segment slope): a step between two segments
	// moves no slope, a leak, which raises the heap within every segment,
	// does.
	HeapSettle time.Duration
	// HeapNoise (bytes) is the spread of one scrape of heap in use about
	// its settled level, at most: each scrape lands anywhere in a GC cycle
	// of a few seconds (0.4 to 1.0 MiB measured in four earlier runs). The slope is fitted to every settled scrape rather than to
	// a floor (the lowest of each window), which would throw most of a
	// short run's few scrapes away. A process's limit is the larger of
	// HeapSlope and twice the slope's standard error, 2 HeapNoise /
	// sqrt(Sxx): a short run resolves no finer.
	HeapNoise float64
	// HeapStep (bytes) bounds the steps: the floor (lowest scrape) of a
	// process's last segment may exceed that of its first by at most
	// HeapStep plus HeapSlope over the time between them, so that steps
	// that pile up (a leak per relist) still fail.
	HeapStep float64
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
		HeapSettle:      15 * time.Second,
		HeapNoise:       1 << 20,
		HeapStep:        10 << 20,
		GoroutineSlope:  1,
		FDSlope:         0.5,
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
	Slot   string
	Gen    int
	Leader bool
	// Since is when the process took this role: its first sample in it,
	// judged or not (a stretch that starts at the warm-up's end took its
	// role long before).
	Since   time.Duration
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
	// since is when the current sample's process took its role.
	since, prev := time.Duration(0), Sample{}
	for i, x := range s {
		if i == 0 || x.Slot != prev.Slot || x.Gen != prev.Gen || x.Leader != prev.Leader {
			since = x.At
		}
		prev = x
		if x.At > end || x.At < warmup || x.At < x.Started+processWarmup {
			continue
		}
		if n := len(out); n > 0 {
			last := &out[n-1]
			if last.Slot == x.Slot && last.Gen == x.Gen && last.Leader == x.Leader && last.Since == since {
				last.Samples = append(last.Samples, x)
				continue
			}
		}
		out = append(out, Stretch{Slot: x.Slot, Gen: x.Gen, Leader: x.Leader, Since: since, Samples: []Sample{x}})
	}
	return out
}

// Verdict of one stretch.
type StretchReport struct {
	Name     string
	From, To time.Duration
	// Judged is false for a stretch shorter than Limits.MinSpan.
	Judged bool
	// Slopes per minute (the heap is judged per process: HeapReport).
	GoroutineSlope, FDSlope float64
	// Baselines: the median of the first minute's samples.
	HeapBase, GoroutineBase, FDBase float64
	FDLast                          float64
	// Returns counts the faults after which the goroutines were checked,
	// and Problems says what broke a limit.
	Returns  int
	Problems []string
}

// HeapReport is the verdict on one process's heap over its judged
// stretches (Limits.HeapSettle).
type HeapReport struct {
	Name     string
	From, To time.Duration
	// Judged is false when the settled segments span less than
	// Limits.MinSpan in all.
	Judged bool
	// Slope is the pooled within-segment slope (bytes per minute) over
	// Segments segments spanning Fit in all; Rise is the floor of the last
	// segment less that of the first (bytes), the steps included. StdErr
	// is the slope's standard error for scrapes spread by
	// Limits.HeapNoise, Limit the slope allowed.
	Slope, StdErr, Limit float64
	Segments             int
	Fit                  time.Duration
	Rise                 float64
	Problems             []string
}

// Report is the verdict over every stretch.
type Report struct {
	Stretches []StretchReport
	Heaps     []HeapReport
	// Judged counts the stretches long enough to judge, HeapJudged the
	// processes whose heap was; Returns the (stretch, fault) pairs whose
	// goroutines were checked.
	Judged, HeapJudged, Returns int
	Problems                    []string
}

// Pass is true when something was judged and nothing broke a limit.
func (r Report) Pass() bool { return r.Judged > 0 && len(r.Problems) == 0 }

// Analyze judges the samples taken before end against l.
func Analyze(samples []Sample, faults []Fault, end time.Duration, l Limits) Report {
	var r Report
	sts := Stretches(samples, l.Warmup, l.ProcessWarmup, end)
	for _, st := range sts {
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
	// Stretches come sorted by slot and generation: one process's are
	// next to each other.
	for i := 0; i < len(sts); {
		j := i + 1
		for j < len(sts) && sts[j].Slot == sts[i].Slot && sts[j].Gen == sts[i].Gen {
			j++
		}
		hr := judgeHeap(sts[i:j], faults, l)
		if hr.Judged {
			r.HeapJudged++
		}
		for _, p := range hr.Problems {
			r.Problems = append(r.Problems, hr.Name+": "+p)
		}
		r.Heaps = append(r.Heaps, hr)
		i = j
	}
	if r.Judged == 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("no process stayed in one role for %v after the warm-up: nothing to judge", l.MinSpan))
	} else if r.HeapJudged == 0 {
		// A run whose faults left too little settled heap to fit would
		// pass whatever the heap did.
		r.Problems = append(r.Problems, fmt.Sprintf("no process's heap settled (%v after each fault and role change) for %v in all: the heap was not judged", l.HeapSettle, l.MinSpan))
	}
	return r
}

// judgeHeap judges one process's heap over its stretches.
func judgeHeap(sts []Stretch, faults []Fault, l Limits) HeapReport {
	last := sts[len(sts)-1].Samples
	hr := HeapReport{Name: fmt.Sprintf("%s#%d", sts[0].Slot, sts[0].Gen), From: sts[0].Samples[0].At, To: last[len(last)-1].At}
	var xs, ys [][]float64
	var floors []float64
	var floorAt []time.Duration
	for _, st := range sts {
		for _, seg := range Segments(st, faults, l.HeapSettle) {
			var x, y []float64
			lowest := seg[0]
			for _, s := range seg {
				x, y = append(x, s.At.Minutes()), append(y, s.Heap)
				if s.Heap < lowest.Heap {
					lowest = s
				}
			}
			xs, ys = append(xs, x), append(ys, y)
			floors, floorAt = append(floors, lowest.Heap), append(floorAt, lowest.At)
			hr.Fit += seg[len(seg)-1].At - seg[0].At
		}
	}
	hr.Segments = len(xs)
	var sxx float64
	hr.Slope, sxx, hr.Judged = PooledSlope(xs, ys)
	hr.Judged = hr.Judged && hr.Fit >= l.MinSpan
	if !hr.Judged {
		return hr
	}
	hr.StdErr = l.HeapNoise / math.Sqrt(sxx)
	hr.Limit = max(l.HeapSlope, 2*hr.StdErr)
	if hr.Slope > hr.Limit {
		hr.Problems = append(hr.Problems, fmt.Sprintf("heap grows %.2f MiB/min once settled (limit %.2f; fitted over %d segments, %v in all)",
			hr.Slope/(1<<20), hr.Limit/(1<<20), hr.Segments, hr.Fit.Round(time.Second)))
	}
	hr.Rise = floors[len(floors)-1] - floors[0]
	between := floorAt[len(floorAt)-1] - floorAt[0]
	if limit := l.HeapStep + l.HeapSlope*between.Minutes(); hr.Rise > limit {
		hr.Problems = append(hr.Problems, fmt.Sprintf("heap floor rises %.1f MiB in steps from %v to %v (limit %.1f: %.0f MiB plus %.0f MiB/min)",
			hr.Rise/(1<<20), floorAt[0].Round(time.Second), floorAt[len(floorAt)-1].Round(time.Second), limit/(1<<20), l.HeapStep/(1<<20), l.HeapSlope/(1<<20)))
	}
	return hr
}

func judge(st Stretch, faults []Fault, l Limits) StretchReport {
	ss := st.Samples
	sr := StretchReport{Name: st.Name(), From: ss[0].At, To: ss[len(ss)-1].At}
	if st.Span() < l.MinSpan {
		return sr
	}
	sr.Judged = true
	first := ss[0].At
	var mins, gs, fds []float64
	for _, x := range ss {
		mins = append(mins, x.At.Minutes())
		gs = append(gs, x.Goroutines)
		fds = append(fds, x.FDs)
	}
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

// Segments cuts a stretch's samples into its settled segments for the
// heap: a sample is left out from a fault's start until settle after its
// end, and until settle after the process took its role (Stretch.Since);
// each fault's start ends a segment.
func Segments(st Stretch, faults []Fault, settle time.Duration) [][]Sample {
	var out [][]Sample
	seg := -1
	for _, x := range st.Samples {
		if x.At < st.Since+settle {
			continue
		}
		n, settled := 0, true
		for _, f := range faults {
			if f.At <= x.At {
				n++
			}
			if x.At >= f.At && x.At < f.End+settle {
				settled = false
			}
		}
		if !settled {
			continue
		}
		if n != seg || len(out) == 0 {
			out = append(out, nil)
			seg = n
		}
		out[len(out)-1] = append(out[len(out)-1], x)
	}
	return out
}

// PooledSlope is the least-squares slope common to several groups of
// points, each group on a line of its own level: the pooled within-group
// slope, sum of the groups' Sxy over sum of their Sxx (returned: the
// slope's standard error is the ys' spread over its square root). A step
// between two groups moves it not at all; ok is false when no group has
// two distinct xs.
func PooledSlope(xs, ys [][]float64) (slope, sxx float64, ok bool) {
	var sxy float64
	for g := range xs {
		x, y := xs[g], ys[g]
		if len(x) < 2 || len(x) != len(y) {
			continue
		}
		var mx, my float64
		for i := range x {
			mx += x[i]
			my += y[i]
		}
		mx /= float64(len(x))
		my /= float64(len(y))
		for i := range x {
			sxx += (x[i] - mx) * (x[i] - mx)
			sxy += (x[i] - mx) * (y[i] - my)
		}
	}
	if sxx == 0 {
		return 0, 0, false
	}
	return sxy / sxx, sxx, true
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
