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
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// allPhases are the phase names -phases accepts. "ceiling" runs the load
// generator once per -ceiling-c concurrency over pre-created Books (the
// backlog ceiling), "ceiling-live" once per concurrency creating the Books
// too (the live ceiling); "restart" restarts ours over ours-live's Books, or
// over ours-backlog's when ours-live is not selected (and the tuned twin
// over twin-tuned-backlog's when twin-tuned-live is not selected);
// "restart-watchlist-off" restarts ours once more with client-go's
// streaming lists off; "capacity" is the
// paced search for the load generator, ours and twin-tuned
// (-capacity-configs); "restart-live" restarts ours, ours in arrival order
// and twin-tuned over N Books each converged, under a paced live writer
// (restartlive.go); "failover-live" the same with a warm standby taking over
// from a killed leader (failoverlive.go); "ours-ui-backlog" and
// "ours-ui-live" run ours with the live view on and one client subscribed
// to its event stream.
// fork:begin v2
// "v1-backlog" is the backlog phase of the last v1-only release under its
// own CRD, "v2-only-backlog" ours under a CRD without v1 (v1phase.go).
// fork:end v2
var allPhases = []string{"ceiling", "ceiling-live", "ceiling-events",
	"ours-backlog", "ours-ui-backlog", "twin-tuned-backlog", "twin-same-backlog", "twin-default-backlog",
	"ours-live", "ours-ui-live", "restart", "twin-tuned-live", "twin-same-live", "twin-default-live", "capacity", "restart-live", "failover-live", "restart-watchlist-off",
	"v1-backlog", "v2-only-backlog", // fork:line v2
}

// defaultPhases leave out what no bar needs.
var defaultPhases = []string{"ceiling", "ceiling-live",
	"ours-backlog", "ours-ui-backlog", "twin-tuned-backlog", "twin-same-backlog", "twin-default-backlog",
	"ours-live", "ours-ui-live", "restart", "twin-tuned-live", "capacity",
	"v1-backlog", // fork:line v2
}

// largeN is where "default" becomes largePhases: the ceiling sweeps, the
// live and capacity phases and the scaffold twins would take hours there,
// and what is asked at that scale is memory, restarts and live-first.
const largeN = 50000

// largePhases are the default phases at N ≥ largeN.
var largePhases = []string{"ours-backlog", "twin-tuned-backlog", "restart", "restart-watchlist-off", "restart-live"}

func selectPhases(list string, n int) (map[string]bool, error) {
	out := map[string]bool{}
	for _, p := range strings.Split(list, ",") {
		switch p = strings.TrimSpace(p); p {
		case "all":
			for _, q := range allPhases {
				out[q] = true
			}
		case "default":
			defaults := defaultPhases
			if n >= largeN {
				defaults = largePhases
			}
			for _, q := range defaults {
				out[q] = true
			}
		default:
			if !slices.Contains(allPhases, p) {
				return nil, fmt.Errorf("-phases: unknown phase %q; known: default, all, %s", p, strings.Join(allPhases, ", "))
			}
			out[p] = true
		}
	}
	if out["capacity"] && !out["ceiling-live"] {
		return nil, fmt.Errorf("-phases: capacity is paced in fractions of the round's live ceiling; add ceiling-live")
	}
	if out["restart-watchlist-off"] && !out["restart"] {
		return nil, fmt.Errorf("-phases: restart-watchlist-off restarts ours a second time in the restart phase; add restart")
	}
	if out["restart"] && !out["ours-live"] && !out["ours-backlog"] {
		return nil, fmt.Errorf("-phases: restart restarts ours over the Books ours-live (or ours-backlog) converged; add one of them")
	}
	return out, nil
}

// unit is what runs between two namespace deletions: one phase, or
// ours-live followed by the restart over its Books.
type unit struct {
	name string
	run  func(ctx context.Context, r *Round) ([]*Phase, error)
}

// plan lists the selected units of one round in a fixed order, which each
// round then shuffles. The capacity search is not a unit: it needs the
// round's ceiling, so it runs after them.
func (e *env) plan() []unit {
	var units []unit
	sel := e.o.phases
	if sel["ceiling"] {
		for _, c := range e.o.ceilingC {
			name := fmt.Sprintf("ceiling-c%d", c)
			units = append(units, unit{name, func(ctx context.Context, r *Round) ([]*Phase, error) {
				p, err := e.ceilingPhase(ctx, name, c, false)
				return []*Phase{p}, err
			}})
		}
	}
	if sel["ceiling-live"] {
		for _, c := range e.o.ceilingC {
			name := fmt.Sprintf("ceiling-live-c%d", c)
			units = append(units, unit{name, func(ctx context.Context, r *Round) ([]*Phase, error) {
				p, err := e.liveCeilingPhase(ctx, name, c, 0)
				return []*Phase{p}, err
			}})
		}
	}
	if sel["ceiling-events"] {
		units = append(units, unit{"ceiling-events", func(ctx context.Context, r *Round) ([]*Phase, error) {
			p, err := e.ceilingPhase(ctx, "ceiling-events", e.o.c, true)
			return []*Phase{p}, err
		}})
	}
	for _, config := range []string{"ours", "ours-ui", "twin-tuned", "twin-same", "twin-default"} {
		if name := config + "-backlog"; sel[name] {
			// At large N (-n 50000) the restart may follow the backlog
			// phase, so that the Books are not created twice; the tuned
			// twin restarts there too (it has no live phase to follow).
			withRestart := sel["restart"] && (config == "ours" && !sel["ours-live"] ||
				config == "twin-tuned" && !sel["twin-tuned-live"])
			label := name
			if withRestart {
				label += "+restart"
			}
			units = append(units, unit{label, func(ctx context.Context, r *Round) ([]*Phase, error) {
				s := e.controller(config)
				p, err := e.backlogPhase(ctx, name, s)
				if err != nil || !withRestart {
					return []*Phase{p}, err
				}
				err = e.restart(ctx, r, p, s)
				return []*Phase{p}, err
			}})
		}
		name := config + "-live"
		if !sel[name] {
			continue
		}
		withRestart := config == "ours" && sel["restart"]
		label := name
		if withRestart {
			label += "+restart"
		}
		units = append(units, unit{label, func(ctx context.Context, r *Round) ([]*Phase, error) {
			s := e.controller(config)
			p, err := e.livePhase(ctx, name, s, 0)
			if err != nil || !withRestart {
				return []*Phase{p}, err
			}
			err = e.restart(ctx, r, p, s)
			return []*Phase{p}, err
		}})
	}
	// fork:begin v2
	if sel[v1Phase] {
		units = append(units, unit{v1Phase, e.v1BacklogUnit})
	}
	if sel[v2OnlyPhase] {
		units = append(units, unit{v2OnlyPhase, e.v2OnlyBacklogUnit})
	}
	// fork:end v2
	for _, live := range []struct {
		phase string
		run   func(context.Context, []string) (*Phase, []*LiveRestart, error)
	}{{"restart-live", e.restartLiveUnit}, {"failover-live", e.failoverLiveUnit}} {
		if !sel[live.phase] {
			continue
		}
		for _, configs := range liveGroups(e.o.liveConfigs) {
			units = append(units, unit{live.phase + "-" + strings.Join(configs, "-"), func(ctx context.Context, r *Round) ([]*Phase, error) {
				// Which of a shared unit's configurations restarts first
				// alternates over the rounds.
				order := slices.Clone(configs)
				if r.Index%2 == 0 {
					slices.Reverse(order)
				}
				p, xs, err := live.run(ctx, order)
				for _, x := range xs {
					r.LiveRestarts = append(r.LiveRestarts, x)
					logf("  %s: %s", live.phase, x.summary())
				}
				return []*Phase{p}, err
			}})
		}
	}
	return units
}

// liveGroups groups the live configurations by binary: ours and ours-fifo
// share one unit (and its N Books), the tuned twin has its own.
func liveGroups(configs []string) [][]string {
	var ours, out [][]string
	var group []string
	for _, c := range configs {
		if c == "ours" || c == "ours-fifo" {
			group = append(group, c)
		} else {
			out = append(out, []string{c})
		}
	}
	if len(group) > 0 {
		ours = [][]string{group}
	}
	return append(ours, out...)
}

// restart runs the restart phase over the Books p converged, into r: ours
// into r.Restart (the bar's), then ours again with streaming lists off
// when restart-watchlist-off is selected; the twin into r.OtherRestarts.
func (e *env) restart(ctx context.Context, r *Round, p *Phase, s controllerSpec) error {
	specs := []controllerSpec{s}
	if s.Config == "ours" && e.o.phases["restart-watchlist-off"] {
		specs = append(specs, withWatchListOff(s))
	}
	for _, s := range specs {
		x, err := e.restartPhase(ctx, p, s)
		if x != nil {
			logf("  restart: %s", x.summary())
			if s.Config == "ours" && !x.WatchListOff {
				r.Restart = x
			} else {
				r.OtherRestarts = append(r.OtherRestarts, x)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// order is the round's permutation of the plan: a shuffle seeded by -seed
// and the round number, so that -seed reproduces every round's order.
func (e *env) order(round int, plan []unit) []unit {
	rng := rand.New(rand.NewPCG(uint64(e.o.seed), uint64(round)))
	out := slices.Clone(plan)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// runRound runs every unit of the plan in the round's order, deleting each
// unit's namespace when it ends, then the capacity searches.
func (e *env) runRound(ctx context.Context, index int, plan []unit) (*Round, error) {
	e.round = index
	r := &Round{Index: index}
	start := time.Now()
	units := e.order(index, plan)
	for _, u := range units {
		r.Order = append(r.Order, u.name)
	}
	logf("round %d/%d, order: %s", index, e.o.rounds, strings.Join(r.Order, ", "))
	for _, u := range units {
		e.progress.begin(index, u.name)
		phases, err := u.run(ctx, r)
		for _, p := range phases {
			if p == nil {
				continue
			}
			if derr := e.deleteNamespace(ctx, p); derr != nil && err == nil {
				err = derr
			}
			if err == nil {
				r.Phases = append(r.Phases, p)
				logf("  %s: %s; namespace deleted in %.1fs", p.Name, p.summary(), p.NamespaceDeleteSeconds)
			}
		}
		if err != nil {
			return r, fmt.Errorf("%s: %w", u.name, err)
		}
		e.progress.end()
	}
	r.bestCeiling()
	if e.o.phases["capacity"] {
		if r.LiveCeiling == 0 {
			return r, fmt.Errorf("no live ceiling measured this round, and the capacity search is paced by it")
		}
		// The load generator's own capacity is the server's best at the
		// latency target. Rotate which search goes first, as the phases
		// are shuffled.
		configs := slices.Clone(e.o.capacityConfigs)
		k := (index - 1) % len(configs)
		configs = append(configs[k:], configs[:k]...)
		for _, config := range configs {
			var previous *Capacity
			if len(e.res.Rounds) > 0 {
				previous = e.res.Rounds[len(e.res.Rounds)-1].capacityOf(config)
			}
			c, err := e.capacity(ctx, r, config, previous)
			if c != nil {
				r.Capacity = append(r.Capacity, c)
			}
			if err != nil {
				return r, fmt.Errorf("capacity of %s: %w", config, err)
			}
		}
	}
	r.Seconds = round(time.Since(start).Seconds(), 1)
	logf("round %d/%d done in %s", index, e.o.rounds, time.Since(start).Round(time.Second))
	return r, nil
}

// bestCeiling picks the round's ceilings: the best of the load generator's
// concurrencies, over pre-created Books and creating them.
func (r *Round) bestCeiling() {
	for _, p := range r.Phases {
		switch {
		case p.Config != "ceiling" || p.Name == "ceiling-events":
		case p.Mode == "ceiling" && p.BooksPerSecond > r.Ceiling:
			r.Ceiling, r.CeilingPhase = p.BooksPerSecond, p.Name
		case p.Mode == "ceiling-live" && p.BooksPerSecond > r.LiveCeiling:
			r.LiveCeiling, r.LiveCeilingPhase = p.BooksPerSecond, p.Name
		}
	}
}

// progress prints where the run is and a rough estimate of what is left.
type progress struct {
	rounds, units int
	capacity      bool
	start         time.Time
	unitStart     time.Time
	unitTime      time.Duration // spent in units so far, capacity searches not counted
	done          int
	label         string
}

func newProgress(rounds, units int, capacity bool) *progress {
	return &progress{rounds: rounds, units: units, capacity: capacity, start: time.Now()}
}

func (p *progress) begin(round int, name string) {
	p.unitStart = time.Now()
	eta := ""
	if p.done > 0 {
		left := p.unitTime / time.Duration(p.done) * time.Duration(p.rounds*p.units-p.done)
		eta = fmt.Sprintf(", about %s of phases left", left.Round(time.Minute))
		if p.capacity {
			eta += " plus the capacity searches"
		}
	}
	p.label = fmt.Sprintf("[round %d/%d, %d/%d] %s", round, p.rounds, p.done%p.units+1, p.units, name)
	logf("%s (elapsed %s%s)", p.label, time.Since(p.start).Round(time.Second), eta)
}

func (p *progress) end() {
	p.done++
	p.unitTime += time.Since(p.unitStart)
	logf("%s done in %s", p.label, time.Since(p.unitStart).Round(time.Second))
}
