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
	"image/color"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// phaseOrder is the order of the phase table, whatever order the rounds
// ran them in.
var phaseOrder = []string{"ours-backlog", "ours-ui-backlog", "twin-tuned-backlog", "twin-same-backlog", "twin-default-backlog",
	"ours-live", "ours-ui-live", "twin-tuned-live", "twin-same-live", "twin-default-live", "ceiling-events",
	"v1-backlog", "v2-only-backlog", // fork:line v2
}

// write writes <label>.json (every round's raw figures), <label>.md and
// the charts, and prints the Markdown.
func write(o options, r *Result) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	base := filepath.Join(o.out, o.label)
	if err := writeJSON(base+".json", r); err != nil {
		return err
	}
	charts := map[string]string{}
	chartRound := r.medianRound()
	if chartRound != nil {
		for _, c := range []struct{ suffix, title, mode string }{
			{".png", "Backlog: N Books pre-created, controller started at t=0", "backlog"},
			{"-live.png", "Live: controller running, N Books created from t=0", "live"},
		} {
			ok, err := chart(chartRound, base+c.suffix, fmt.Sprintf("%s (round %d)", c.title, chartRound.Index), c.mode)
			if err != nil {
				return err
			}
			if ok {
				charts[c.mode] = filepath.Base(base + c.suffix)
			}
		}
	}
	md := markdown(r, charts, chartRound)
	if err := os.WriteFile(base+".md", []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	logf("wrote %s.{md,json} and charts", base)
	for _, b := range r.Bars {
		switch {
		case b.Target == "":
		case len(b.Values) == 0:
			logf("%s: %s", b.Name, b.Result)
		default:
			logf("%-4s %s: median %g (min %g, max %g), target %s", strings.SplitN(b.Result, ":", 2)[0], b.Name, b.Median, b.Min, b.Max, b.Target)
		}
	}
	return nil
}

// medianRound is the round whose ours/ceiling ratio is the median, for the
// charts; the last round when that ratio is missing.
func (r *Result) medianRound() *Round {
	if len(r.Rounds) == 0 {
		return nil
	}
	rs := slices.Clone(r.Rounds)
	key := func(x *Round) float64 {
		if p := x.phase("ours-backlog"); p != nil && x.Ceiling > 0 {
			return p.BooksPerSecond / x.Ceiling
		}
		return float64(x.Index)
	}
	slices.SortFunc(rs, func(a, b *Round) int {
		switch ka, kb := key(a), key(b); {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	return rs[(len(rs)-1)/2]
}

func markdown(r *Result, charts map[string]string, chartRound *Round) string {
	var b strings.Builder
	fmt.Fprintf(&b, "N = %d Books per phase, %d round(s), each running the phases in its own order (seed %d); "+
		"ceiling = the best of the load generator at %s writers; live phases create at concurrency C = %d; "+
		"%d cores (%s), %s, %s; load average at start %s; %s.\n\n",
		r.N, len(r.Rounds), r.Seed, joinInts(r.CeilingC), r.C, r.Machine.Cores, r.Machine.CPU, r.Machine.GoVersion,
		r.Machine.OS, r.Machine.LoadAvgStart, r.Started)
	if r.WarmUp {
		fmt.Fprintf(&b, "An unmeasured warm-up round (the load generator over %d Books) ran before the first round. ", r.N)
	}
	fmt.Fprintln(&b, "Every phase's namespace was deleted, and the deletion waited for, before the next phase began.")

	fmt.Fprintln(&b, "\n| Bar | Median | Min–max | Per round (figures) | Target | Result |")
	fmt.Fprintln(&b, "|---|--:|--:|---|---|---|")
	for _, x := range r.Bars {
		var per []string
		for _, v := range x.Values {
			per = append(per, fmt.Sprintf("%g (%s)", v.Value, v.Figures))
		}
		res := x.Result
		if res == "PASS" || res == "FAIL" {
			res = "**" + res + "**"
		}
		med, minMax := "–", "–"
		if len(x.Values) > 0 {
			med, minMax = fmt.Sprintf("%g", x.Median), fmt.Sprintf("%g–%g", x.Min, x.Max)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", x.Name, med, minMax, strings.Join(per, "; "), x.Target, res)
	}

	ceilingTable(&b, r, "Ceiling (Books/s; pre-created Books, the 2 writes a controller makes for each), by writer concurrency:",
		"ceiling-c", func(rd *Round) float64 { return rd.Ceiling })
	ceilingTable(&b, r, "Live ceiling (Books/s; each writer creates a Book and makes its 2 writes: 3 per Book, as in a live phase; p99 create→Ready in brackets), by writer concurrency:",
		"ceiling-live-c", func(rd *Round) float64 { return rd.LiveCeiling })

	fmt.Fprintln(&b, "\nPhases, median over rounds (requests by verb from the last round):")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| Phase | Controller (workers; client limit) | Books/s | Converged (s) | create→Ready p50 / p99 (ms) | CPU (s) | Peak RSS | Peak heap in use | Writes | Requests by verb |")
	fmt.Fprintln(&b, "|---|---|--:|--:|--:|--:|--:|--:|--:|---|")
	for _, name := range phaseOrder {
		var ps []*Phase
		for _, rd := range r.Rounds {
			if p := rd.phase(name); p != nil {
				ps = append(ps, p)
			}
		}
		if len(ps) == 0 {
			continue
		}
		med := func(f func(*Phase) float64) float64 { return medianOf(ps, f) }
		last := ps[len(ps)-1]
		lat := "–"
		if last.Mode == "live" {
			lat = fmt.Sprintf("%.0f / %.0f", med(func(p *Phase) float64 { return p.LatencyP50Ms }), med(func(p *Phase) float64 { return p.LatencyP99Ms }))
		}
		cpu, rss, heap := "–", "–", "–"
		if last.Mode != "ceiling" {
			cpu = fmt.Sprintf("%.2f", med(func(p *Phase) float64 { return p.CPUSeconds }))
			rss = mib(uint64(med(func(p *Phase) float64 { return float64(p.PeakRSSBytes) })))
			heap = mib(uint64(med(func(p *Phase) float64 { return float64(p.PeakHeapInuseBytes) })))
		}
		fmt.Fprintf(&b, "| %s | %s (%d; %s) | %.0f | %.2f | %s | %s | %s | %s | %.0f | %s |\n",
			name, last.Controller, last.Workers, shortLimit(last.ClientLimit),
			med(func(p *Phase) float64 { return p.BooksPerSecond }), med(func(p *Phase) float64 { return p.ConvergeSeconds }),
			lat, cpu, rss, heap, med(func(p *Phase) float64 { return p.Writes }), verbs(last.Requests))
	}

	if len(r.Costs) > 0 {
		fmt.Fprintf(&b, "\nCost per configuration (backlog phases, N = %d, median over rounds; per-Book memory includes the process baseline unless marked marginal):\n\n", r.N)
		fmt.Fprintln(&b, "| Configuration | Books/s | CPU s per 1,000 Books | Peak RSS | Peak RSS per 1,000 Books | Heap in use per cached Book (end) | RSS per cached Book (end) | Marginal RSS per cached Book | RSS backed by the binary (end) | Writes per Book |")
		fmt.Fprintln(&b, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
		for _, c := range r.Costs {
			marginal := "–"
			if c.MarginalRSSBytesPerBk != 0 {
				marginal = kib(c.MarginalRSSBytesPerBk)
			}
			file := "–"
			if c.EndRSSFileBytes > 0 {
				file = mib(uint64(c.EndRSSFileBytes))
			}
			fmt.Fprintf(&b, "| %s | %.0f | %.2f | %s | %s | %s | %s | %s | %s | %.2f |\n", c.Config, c.BooksPerSecond, c.CPUSecondsPer1000,
				mib(uint64(c.PeakRSSBytes)), mib(uint64(c.PeakRSSBytesPer1000)), kib(c.EndHeapBytesPerBook), kib(c.EndRSSBytesPerBook), marginal, file, c.WritesPerBook)
		}
	}

	var caps []string
	for _, rd := range r.Rounds {
		for _, c := range rd.Capacity {
			var steps []string
			for _, s := range c.Steps {
				again := ""
				if s.Try > 1 {
					again = " again"
				}
				steps = append(steps, fmt.Sprintf("%.0f%%%s (%.0f/s): %s, %s", s.Fraction*100, again, s.TargetRate, map[bool]string{true: "pass", false: "fail"}[s.Pass], s.Why))
			}
			who := c.Config
			if who == "ceiling" {
				who = "load generator (no controller)"
			}
			ofBacklog := "–"
			if c.BacklogCeilingBooksPerSecond > 0 {
				ofBacklog = fmt.Sprintf("%.0f%% of %.0f/s", c.FractionOfBacklogCeiling*100, c.BacklogCeilingBooksPerSecond)
			}
			caps = append(caps, fmt.Sprintf("| %d | %s | %.0f | %s | **%.0f%%** (%.0f/s) | %s |", rd.Index, who, c.CeilingBooksPerSecond,
				strings.Join(steps, "; "), c.Fraction*100, c.BooksPerSecond, ofBacklog))
		}
	}
	if len(caps) > 0 {
		fmt.Fprintf(&b, "\nCapacity at p99 create→Ready ≤ %.0f ms: Books created at a paced rate (steps of the round's live ceiling) while the controller runs (for the load generator: handed to its writers at that rate, each creating a Book and making its two writes); "+
			"a step passes when p99 over the %d Books is within the target and the creators kept at least %.0f%% of the pace; a failed step is run again (up to %d runs) and passes if any run does. "+
			"The last column puts the same rate against the backlog ceiling, which makes 2 writes per Book where a step makes 3:\n\n", r.CapacityP99Ms, r.N, minPaceKept*100, r.CapacityTries)
		fmt.Fprintln(&b, "| Round | Controller | Live ceiling (Books/s) | Steps | Capacity | Of the backlog ceiling |")
		fmt.Fprintln(&b, "|--:|---|--:|---|--:|--:|")
		fmt.Fprintln(&b, strings.Join(caps, "\n"))
	}

	var restarts []string
	for _, rd := range r.Rounds {
		all := rd.OtherRestarts
		if rd.Restart != nil {
			all = append([]*Restart{rd.Restart}, all...)
		}
		for _, x := range all {
			floor := "–"
			if x.Floor != nil {
				floor = fmt.Sprintf("%.2f", x.Floor.Seconds)
			}
			restarts = append(restarts, fmt.Sprintf("| %d | %s | %s | %d | %s | %.2f | %.2f | %.0f | %s | %.0f | %s | %s → %s | %.1f |", rd.Index, x.Controller, x.After, x.N,
				floor, x.SyncedSeconds, x.IdleSeconds, x.Reconciles, verbs(x.Requests), x.Writes, mib(x.PeakRSSBytes), mib(x.APIServerRSSBeforeBytes), mib(x.APIServerPeakRSSBytes), x.APIServerCPUSeconds))
		}
	}
	if len(restarts) > 0 {
		fmt.Fprintln(&b, "\nRestart over the Books a phase of the same configuration converged (*after*): *floor* = the API server streaming the same two lists (streaming lists, compressed) to a client that only reads the bytes, just before; "+
			"*synced* = readyz 200 (both caches synced); *idle* = queue empty, no active worker and no request for 2 s (the time that window began); "+
			"the API server's RSS just before the start and its peak until idle, and its CPU from the start to idle; before the floor and before the start the API server collected its garbage (*WatchList off*: client-go's streaming lists turned off with "+watchListOff+"):")
		fmt.Fprintln(&b)
		fmt.Fprintln(&b, "| Round | Controller | After | Books | Floor (s) | Synced (s) | Idle (s) | Reconciles | Requests | Writes | Peak RSS | API server RSS | API server CPU (s) |")
		fmt.Fprintln(&b, "|--:|---|---|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|")
		fmt.Fprintln(&b, strings.Join(restarts, "\n"))
	}

	var live []string
	for _, rd := range r.Rounds {
		for _, x := range rd.LiveRestarts {
			kind := "restart"
			if x.Failover {
				kind = "failover"
			}
			live = append(live, fmt.Sprintf("| %d | %s | %s | %d | %.2f | %.2f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %d |", rd.Index, kind, x.Controller, x.N,
				x.SyncedSeconds, x.IdleSeconds, x.CreateP50Ms, x.CreateP99Ms, x.EditP50Ms, x.EditP99Ms, x.CreateRawP50Ms, x.CreateRawP99Ms, x.EditRawP50Ms, x.EditRawP99Ms, x.UntouchedWritten))
		}
	}
	if len(live) > 0 {
		fmt.Fprintf(&b, "\nRestart and failover under live writes (restart-live, failover-live): each configuration converges N Books, then restarts (or its leader is SIGKILLed with a warm standby running), and from %v after the process start (the kill) %d new Books and %d edits of old ones are made at %.0f/s each. "+
			"Latencies (p50 / p99, ms) count from the write or from the caches' sync (the Lease taken), whichever is later; *from the write* counts from the write alone. Synced (Lease taken) and idle count from the process start (the kill); *converged objects written* counts the Books and ConfigMaps the writer left alone whose resourceVersion changed:\n\n", liveDelay, liveOps, liveOps, liveRate)
		fmt.Fprintln(&b, "| Round | Kind | Controller | Books | Synced (s) | Idle (s) | Create → Ready | Edit → ConfigMap | Create, from the write | Edit, from the write | Converged objects written |")
		fmt.Fprintln(&b, "|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
		fmt.Fprintln(&b, strings.Join(live, "\n"))
	}

	fmt.Fprintln(&b, "\nRounds:")
	fmt.Fprintln(&b)
	for _, rd := range r.Rounds {
		var del []string
		for _, p := range rd.Phases {
			del = append(del, fmt.Sprintf("%.0f", p.NamespaceDeleteSeconds))
		}
		fmt.Fprintf(&b, "- round %d (%.0f s): %s; namespace deletions took %s s\n", rd.Index, rd.Seconds, strings.Join(rd.Order, " → "), strings.Join(del, ", "))
	}
	if c, ok := charts["backlog"]; ok {
		fmt.Fprintf(&b, "\n![Ready Books over time, backlog, round %d](%s)\n", chartRound.Index, c)
	}
	if c, ok := charts["live"]; ok {
		fmt.Fprintf(&b, "\n![Ready Books over time, live, round %d](%s)\n", chartRound.Index, c)
	}
	return b.String()
}

func roundHeads(r *Result) string {
	var s string
	for _, rd := range r.Rounds {
		s += fmt.Sprintf(" round %d |", rd.Index)
	}
	return s
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

func kib(b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f KiB", b/1024)
}

func shortLimit(s string) string {
	if i := strings.Index(s, " ("); i >= 0 {
		return s[:i]
	}
	return s
}

func verbs(m map[string]float64) string {
	if len(m) == 0 {
		return "–"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// chart draws Books Ready over time for one round's phases of a mode (the
// backlog chart also shows the ceilings, dashed).
func chart(r *Round, path, title, mode string) (bool, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "Books Ready"
	p.Legend.Top = false
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	n := 0
	for _, ph := range r.Phases {
		if ph.Mode != mode && (mode != "backlog" || ph.Mode != "ceiling") && (mode != "live" || ph.Mode != "ceiling-live") {
			continue
		}
		if len(ph.Series) == 0 || ph.CreateRate > 0 {
			continue
		}
		xys := make(plotter.XYs, len(ph.Series))
		for i, s := range ph.Series {
			xys[i].X, xys[i].Y = s[0], s[1]
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return false, err
		}
		l.Width = vg.Points(2)
		l.Color = plotutil.Color(n)
		if ph.Config == "ceiling" {
			l.Color = color.Gray{Y: uint8(40 + (30*n)%160)}
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (%s, %d workers): %.0f/s", ph.Name, ph.Controller, ph.Workers, ph.BooksPerSecond), l)
		n++
	}
	if n == 0 {
		return false, nil
	}
	return true, p.Save(9*vg.Inch, 5*vg.Inch, path)
}

// ceilingTable writes one load generator's rates by writer concurrency, a
// column per round, and the round's best; nothing if no round ran it.
func ceilingTable(b *strings.Builder, r *Result, title, prefix string, best func(*Round) float64) {
	rows := ""
	measured := false
	for _, c := range r.CeilingC {
		rows += fmt.Sprintf("| %d |", c)
		for _, rd := range r.Rounds {
			p := rd.phase(fmt.Sprintf("%s%d", prefix, c))
			switch {
			case p == nil:
				rows += " – |"
			case p.Mode == "ceiling-live":
				measured = true
				rows += fmt.Sprintf(" %.0f (%.0f ms) |", p.BooksPerSecond, p.LatencyP99Ms)
			default:
				measured = true
				rows += fmt.Sprintf(" %.0f |", p.BooksPerSecond)
			}
		}
		rows += "\n"
	}
	if !measured {
		return
	}
	fmt.Fprintf(b, "\n%s\n\n", title)
	fmt.Fprintf(b, "| Writers |%s\n|---|%s\n%s", roundHeads(r), strings.Repeat("--:|", len(r.Rounds)), rows)
	fmt.Fprint(b, "| **best** |")
	for _, rd := range r.Rounds {
		fmt.Fprintf(b, " **%.0f** |", best(rd))
	}
	fmt.Fprintln(b)
}
