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
	"fmt"
	"slices"
	"strings"
)

// Bar is one of issue 13's bars, or a figure kept for information, over
// the rounds: each round's value, and their median, min and max. A bar
// passes on its median (writes on restart: on every round).
type Bar struct {
	Name   string       `json:"name"`
	Target string       `json:"target,omitempty"`
	Values []RoundValue `json:"values"`
	Median float64      `json:"median"`
	Min    float64      `json:"min"`
	Max    float64      `json:"max"`
	// Result is PASS, FAIL, info, or "n/a: why".
	Result string `json:"result"`
}

// RoundValue is a bar's value in one round and the figures it comes from.
type RoundValue struct {
	Round   int     `json:"round"`
	Value   float64 `json:"value"`
	Figures string  `json:"figures"`
}

type barSpec struct {
	name, target string
	ok           func(float64) bool // nil: information only
	minN         int                // the bar applies from this N on
	everyRound   bool               // judge every round (the max), not the median
	value        func(*Round) (float64, string, bool)
}

// bars computes every bar of the issue, and the figures kept for
// information, from the rounds.
func bars(res *Result) []*Bar {
	rate := func(p *Phase) float64 { return p.BooksPerSecond }
	cpu := func(p *Phase) float64 { return p.CPUSeconds }
	rss := func(p *Phase) float64 { return float64(p.PeakRSSBytes) }
	ratio := func(a, b string, field func(*Phase) float64, unit func(float64) string) func(*Round) (float64, string, bool) {
		return func(r *Round) (float64, string, bool) {
			pa, pb := r.phase(a), r.phase(b)
			if pa == nil || pb == nil || field(pb) == 0 {
				return 0, "", false
			}
			return field(pa) / field(pb), unit(field(pa)) + " vs " + unit(field(pb)), true
		}
	}
	perSec := func(v float64) string { return fmt.Sprintf("%.0f/s", v) }
	secs := func(v float64) string { return fmt.Sprintf("%.2f s", v) }
	mibs := func(v float64) string { return mib(uint64(v)) }
	ge := func(x float64) func(float64) bool { return func(v float64) bool { return v >= x } }
	le := func(x float64) func(float64) bool { return func(v float64) bool { return v <= x } }
	toCeiling := func(name string, live bool) func(*Round) (float64, string, bool) {
		return func(r *Round) (float64, string, bool) {
			p := r.phase(name)
			ceiling, from := r.Ceiling, r.CeilingPhase
			if live {
				ceiling, from = r.LiveCeiling, r.LiveCeilingPhase
			}
			if p == nil || ceiling == 0 {
				return 0, "", false
			}
			return p.BooksPerSecond / ceiling, fmt.Sprintf("%.0f/s vs %.0f/s (%s)", p.BooksPerSecond, ceiling, from), true
		}
	}
	capacity := func(config string, live bool) func(*Round) (float64, string, bool) {
		return func(r *Round) (float64, string, bool) {
			c := r.capacityOf(config)
			if c == nil {
				return 0, "", false
			}
			if !live {
				if c.BacklogCeilingBooksPerSecond == 0 {
					return 0, "", false
				}
				return c.FractionOfBacklogCeiling, fmt.Sprintf("%.0f/s of %.0f/s", c.BooksPerSecond, c.BacklogCeilingBooksPerSecond), true
			}
			return c.Fraction, fmt.Sprintf("%.0f/s of %.0f/s", c.BooksPerSecond, c.CeilingBooksPerSecond), true
		}
	}
	ceilings := func(mode string, best func(*Round) float64) func(*Round) (float64, string, bool) {
		return func(r *Round) (float64, string, bool) {
			var parts []string
			for _, p := range r.Phases {
				if p.Mode == mode && p.Config == "ceiling" && p.Name != "ceiling-events" {
					parts = append(parts, fmt.Sprintf("C=%d: %.0f", p.C, p.BooksPerSecond))
				}
			}
			return best(r), strings.Join(parts, ", "), best(r) > 0
		}
	}
	p99 := fmt.Sprintf("p99 ≤ %.0f ms", res.CapacityP99Ms)
	specs := []barSpec{
		{name: "ours / best ceiling (Books/s, backlog)", target: "≥ 0.85", ok: ge(0.85), value: toCeiling("ours-backlog", false)},
		{name: "ours / twin-tuned (Books/s, backlog)", target: "≥ 1.0", ok: ge(1.0), value: ratio("ours-backlog", "twin-tuned-backlog", rate, perSec)},
		{name: "ours / twin-tuned (CPU per Book, backlog)", target: "≤ 0.8", ok: le(0.8), value: ratio("ours-backlog", "twin-tuned-backlog", cpu, secs)},
		{name: "ours / twin-tuned (peak RSS, backlog)", target: "≤ 0.8 at N ≥ 10000", ok: le(0.8), minN: 10000, value: ratio("ours-backlog", "twin-tuned-backlog", rss, mibs)},
		{name: "ours / twin-default (peak RSS, backlog)", target: "≤ 0.6 at N ≥ 10000", ok: le(0.6), minN: 10000, value: ratio("ours-backlog", "twin-default-backlog", rss, mibs)},
		{name: "ours / twin-default (Books/s, backlog)", target: "≥ 2.0", ok: ge(2.0), value: ratio("ours-backlog", "twin-default-backlog", rate, perSec)},
		// fork:begin v2
		// Issue 38: v2, served beside v1 through the webhook, converges as
		// fast as the last release did with v1 alone.
		{name: "ours (v2) / " + v1Release + " (v1 only) (Books/s, backlog)", target: "≥ 0.95", ok: ge(0.95), value: ratio("ours-backlog", v1Phase, rate, perSec)},
		// fork:end v2
		{name: "ours capacity at " + p99 + " / best live ceiling", target: "≥ 0.7", ok: ge(0.7), value: capacity("ours", true)},
		{name: "ours capacity − twin-tuned capacity (fractions of the live ceiling)", target: "≥ 0", ok: ge(0), value: func(r *Round) (float64, string, bool) {
			a, b := r.capacityOf("ours"), r.capacityOf("twin-tuned")
			if a == nil || b == nil {
				return 0, "", false
			}
			return a.Fraction - b.Fraction, fmt.Sprintf("%.1f vs %.1f", a.Fraction, b.Fraction), true
		}},
		// Zero writes prove something only if every Book was synced: a
		// restart whose workers never started would write nothing too, so
		// Books left unreconciled count against the bar as writes do.
		{name: "writes on restart over converged Books", target: "= 0 in every round, every Book reconciled", ok: le(0), everyRound: true, value: func(r *Round) (float64, string, bool) {
			if r.Restart == nil {
				return 0, "", false
			}
			unsynced := max(0, float64(r.Restart.N)-r.Restart.Reconciles)
			return r.Restart.Writes + unsynced, fmt.Sprintf("%s, %.0f reconciles for %d Books, idle after %.2f s",
				verbs(r.Restart.Requests), r.Restart.Reconciles, r.Restart.N, r.Restart.IdleSeconds), true
		}},

		{name: "best ceiling (Books/s; pre-created Books, 2 writes each)", value: ceilings("ceiling", func(r *Round) float64 { return r.Ceiling })},
		{name: "best live ceiling (Books/s; created by the generator, 3 writes each)", value: ceilings("ceiling-live", func(r *Round) float64 { return r.LiveCeiling })},
		{name: "load generator's own capacity at " + p99 + " / best live ceiling", value: capacity("ceiling", true)},
		{name: "ours capacity / the load generator's capacity at " + p99 + " (Books/s)", value: func(r *Round) (float64, string, bool) {
			a, g := r.capacityOf("ours"), r.capacityOf("ceiling")
			if a == nil || g == nil || g.BooksPerSecond == 0 {
				return 0, "", false
			}
			return a.BooksPerSecond / g.BooksPerSecond, fmt.Sprintf("%.0f/s vs %.0f/s", a.BooksPerSecond, g.BooksPerSecond), true
		}},
		{name: "twin-tuned capacity at " + p99 + " / best live ceiling", value: capacity("twin-tuned", true)},
		{name: "ours capacity at " + p99 + " / best (backlog) ceiling", value: capacity("ours", false)},
		{name: "twin-tuned capacity at " + p99 + " / best (backlog) ceiling", value: capacity("twin-tuned", false)},
		{name: "p99 create→Ready, ours-live at full speed (s)", value: func(r *Round) (float64, string, bool) {
			p := r.phase("ours-live")
			if p == nil {
				return 0, "", false
			}
			return p.LatencyP99Ms / 1000, fmt.Sprintf("p50 %.0f ms, created at %.0f/s by %d creators", p.LatencyP50Ms, p.CreateRateAchieved, p.C), true
		}},
		{name: "p99 create→Ready, twin-tuned-live at full speed (s)", value: func(r *Round) (float64, string, bool) {
			p := r.phase("twin-tuned-live")
			if p == nil {
				return 0, "", false
			}
			return p.LatencyP99Ms / 1000, fmt.Sprintf("p50 %.0f ms", p.LatencyP50Ms), true
		}},
		{name: "ours live / best live ceiling (Books/s)", value: toCeiling("ours-live", true)},
		{name: "ours / twin-tuned (Books/s, live)", value: ratio("ours-live", "twin-tuned-live", rate, perSec)},
		// Issue 25's bars: the live view on, with a client subscribed to
		// its event stream, against it off, in the same round.
		{name: "ours with the UI and a client / ours (Books/s, backlog)", target: "≥ 0.95", ok: ge(0.95), value: withUI(ratio("ours-ui-backlog", "ours-backlog", rate, perSec), "ours-ui-backlog")},
		{name: "ours with the UI and a client / ours (CPU per Book, backlog)", target: "≤ 1.10", ok: le(1.10), value: withUI(ratio("ours-ui-backlog", "ours-backlog", cpu, secs), "ours-ui-backlog")},
		{name: "ours with the UI and a client / ours (CPU per Book, live)", value: withUI(ratio("ours-ui-live", "ours-live", cpu, secs), "ours-ui-live")},
		{name: "ours with the UI and a client / ours (p99 create→Ready, live)", value: withUI(ratio("ours-ui-live", "ours-live", func(p *Phase) float64 { return p.LatencyP99Ms }, func(v float64) string { return fmt.Sprintf("%.0f ms", v) }), "ours-ui-live")},
		{name: "ours / twin-same (Books/s, backlog)", value: ratio("ours-backlog", "twin-same-backlog", rate, perSec)},
		{name: "ours / twin-same (CPU per Book, backlog)", value: ratio("ours-backlog", "twin-same-backlog", cpu, secs)},
		{name: "ours / twin-default (CPU per Book, backlog)", value: ratio("ours-backlog", "twin-default-backlog", cpu, secs)},
		// fork:begin v2
		{name: "ours (v2) / " + v1Release + " (v1 only) (CPU per Book, backlog)", value: ratio("ours-backlog", v1Phase, cpu, secs)},
		{name: "ours, v1 not served / " + v1Release + " (v1 only) (Books/s, backlog)", value: ratio(v2OnlyPhase, v1Phase, rate, perSec)},
		{name: "ours / ours with v1 not served (Books/s, backlog): the price of serving v1", value: ratio("ours-backlog", v2OnlyPhase, rate, perSec)},
		// fork:end v2
	}
	specs = append(specs, scaleBars()...)
	var out []*Bar
	for _, s := range specs {
		b := &Bar{Name: s.name, Target: s.target}
		var vs []float64
		for _, r := range res.Rounds {
			if v, fig, ok := s.value(r); ok {
				b.Values = append(b.Values, RoundValue{Round: r.Index, Value: round(v, 3), Figures: fig})
				vs = append(vs, v)
			}
		}
		switch {
		case len(vs) == 0 && (s.ok == nil || res.N < s.minN):
			continue
		case len(vs) == 0:
			b.Result = "n/a: not measured (phases left out)"
			out = append(out, b)
			continue
		}
		b.Median, b.Min, b.Max = round(median(vs), 3), round(slices.Min(vs), 3), round(slices.Max(vs), 3)
		switch {
		case s.ok == nil:
			b.Result = "info"
		case res.N < s.minN:
			b.Result = fmt.Sprintf("n/a: the bar applies at N ≥ %d", s.minN)
		case s.everyRound:
			b.Result = passFail(s.ok(b.Max))
		default:
			b.Result = passFail(s.ok(b.Median))
		}
		out = append(out, b)
	}
	return out
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// medianOf is the median of f over phases.
func medianOf(phases []*Phase, f func(*Phase) float64) float64 {
	vs := make([]float64, len(phases))
	for i, p := range phases {
		vs[i] = f(p)
	}
	return median(vs)
}

// Cost is what one configuration spends per Book in the backlog phases,
// median over rounds.
type Cost struct {
	Config              string  `json:"config"`
	Controller          string  `json:"controller"`
	Rounds              int     `json:"rounds"`
	BooksPerSecond      float64 `json:"booksPerSecond"`
	CPUSecondsPer1000   float64 `json:"cpuSecondsPer1000Books"`
	PeakRSSBytes        float64 `json:"peakRSSBytes"`
	PeakRSSBytesPer1000 float64 `json:"peakRSSBytesPer1000Books"`
	EndHeapBytesPerBook float64 `json:"endHeapInuseBytesPerCachedBook"`
	EndRSSBytesPerBook  float64 `json:"endRSSBytesPerCachedBook"`
	// EndRSSFileBytes is the file-backed part of the end RSS (the
	// binary's pages), which does not grow with the Books cached.
	EndRSSFileBytes       float64 `json:"endRSSFileBytes,omitempty"`
	WritesPerBook         float64 `json:"writesPerBook"`
	IdleRSSBytes          float64 `json:"idleRSSBytes,omitempty"`
	MarginalRSSBytesPerBk float64 `json:"marginalEndRSSBytesPerCachedBook,omitempty"`
}

// costs summarises each configuration's backlog phases. Per-Book memory
// includes the process baseline; where a live phase measured the idle RSS
// over an empty namespace, the marginal RSS per cached Book leaves it out.
func costs(res *Result) []*Cost {
	var out []*Cost
	configs := []string{"ours", "twin-tuned", "twin-same", "twin-default"}
	configs = append(configs, "v1", "v2-only") // fork:line v2
	for _, config := range configs {
		var ps []*Phase
		var idle []float64
		for _, r := range res.Rounds {
			if p := r.phase(config + "-backlog"); p != nil {
				ps = append(ps, p)
			}
			if p := r.phase(config + "-live"); p != nil && p.IdleRSSBytes > 0 {
				idle = append(idle, float64(p.IdleRSSBytes))
			}
		}
		if len(ps) == 0 {
			continue
		}
		med := func(f func(*Phase) float64) float64 { return medianOf(ps, f) }
		n := float64(ps[0].N)
		c := &Cost{Config: config, Controller: ps[0].Controller, Rounds: len(ps),
			BooksPerSecond:      round(med(func(p *Phase) float64 { return p.BooksPerSecond }), 1),
			CPUSecondsPer1000:   round(med(func(p *Phase) float64 { return p.CPUSeconds })/n*1000, 3),
			PeakRSSBytes:        med(func(p *Phase) float64 { return float64(p.PeakRSSBytes) }),
			EndHeapBytesPerBook: round(med(func(p *Phase) float64 { return float64(p.EndHeapInuseBytes) })/n, 0),
			EndRSSBytesPerBook:  round(med(func(p *Phase) float64 { return float64(p.EndRSSBytes) })/n, 0),
			WritesPerBook:       round(med(func(p *Phase) float64 { return p.Writes })/n, 3),
			EndRSSFileBytes:     med(func(p *Phase) float64 { return float64(p.EndRSSFileBytes) }),
		}
		c.PeakRSSBytesPer1000 = round(c.PeakRSSBytes/n*1000, 0)
		if len(idle) > 0 {
			c.IdleRSSBytes = median(idle)
			c.MarginalRSSBytesPerBk = round((c.EndRSSBytesPerBook*n-c.IdleRSSBytes)/n, 0)
		}
		out = append(out, c)
	}
	return out
}

// withUI is value, valid only if the UI phase's client read the event
// stream: a UI that never answered would cost nothing and pass.
func withUI(value func(*Round) (float64, string, bool), phase string) func(*Round) (float64, string, bool) {
	return func(r *Round) (float64, string, bool) {
		v, figures, ok := value(r)
		p := r.phase(phase)
		if !ok || p == nil || p.UIUpdates == 0 {
			return 0, "", false
		}
		return v, fmt.Sprintf("%s; %d updates read", figures, p.UIUpdates), true
	}
}
