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
	"os"
	"slices"
	"strings"
	"testing"
)

// testRound builds a round with backlog phases at the given rates and CPU
// seconds, a best ceiling and a live ceiling of 2/3 of it, capacities (as
// fractions of the live ceiling) and restart writes.
func testRound(i int, ceiling, ours, tuned, def float64, oursCap, tunedCap, restartWrites float64) *Round {
	p := func(name, config string, rate, cpu float64, rss uint64) *Phase {
		return &Phase{Name: name, Config: config, Mode: "backlog", BooksPerSecond: rate, CPUSeconds: cpu, PeakRSSBytes: rss, N: 2000}
	}
	r := &Round{Index: i, Phases: []*Phase{
		{Name: "ceiling-c16", Config: "ceiling", Mode: "ceiling", C: 16, BooksPerSecond: ceiling * 0.9},
		{Name: "ceiling-c128", Config: "ceiling", Mode: "ceiling", C: 128, BooksPerSecond: ceiling},
		{Name: "ceiling-live-c16", Config: "ceiling", Mode: "ceiling-live", C: 16, BooksPerSecond: ceiling * 2 / 3},
		{Name: "ceiling-live-c64", Config: "ceiling", Mode: "ceiling-live", C: 64, BooksPerSecond: ceiling / 2},
		p("ours-backlog", "ours", ours, 1, 50<<20),
		p("twin-tuned-backlog", "twin-tuned", tuned, 2, 80<<20),
		p("twin-default-backlog", "twin-default", def, 3, 90<<20),
	}}
	r.bestCeiling()
	c := func(config string, f float64) *Capacity {
		return &Capacity{Config: config, Fraction: f, CeilingBooksPerSecond: r.LiveCeiling, BooksPerSecond: f * r.LiveCeiling,
			BacklogCeilingBooksPerSecond: r.Ceiling, FractionOfBacklogCeiling: f * r.LiveCeiling / r.Ceiling}
	}
	r.Capacity = []*Capacity{c("ceiling", 0.8), c("ours", oursCap), c("twin-tuned", tunedCap)}
	r.Restart = &Restart{Writes: restartWrites}
	return r
}

func barNamed(t *testing.T, bs []*Bar, prefix string) *Bar {
	t.Helper()
	for _, b := range bs {
		if strings.HasPrefix(b.Name, prefix) {
			return b
		}
	}
	t.Fatalf("no bar %q", prefix)
	return nil
}

func TestBarsJudgeTheMedianAgainstTheBestCeiling(t *testing.T) {
	res := &Result{N: 2000, CapacityP99Ms: 1000, Rounds: []*Round{
		// ours/ceiling: 0.8, 0.9, 0.95 → median 0.9 passes although round 1 misses.
		testRound(1, 1000, 800, 700, 300, 0.7, 0.6, 0),
		testRound(2, 1000, 900, 700, 300, 0.8, 0.6, 0),
		testRound(3, 1000, 950, 1000, 300, 0.6, 0.7, 1),
	}}
	bs := bars(res)

	b := barNamed(t, bs, "ours / best ceiling")
	if b.Median != 0.9 || b.Min != 0.8 || b.Max != 0.95 || b.Result != "PASS" {
		t.Errorf("ours / best ceiling: %+v, want median 0.9, min 0.8, max 0.95, PASS", b)
	}
	if got := b.Values[0].Figures; !strings.Contains(got, "ceiling-c128") {
		t.Errorf("figures %q do not name the best ceiling's phase", got)
	}
	// ours/tuned Books/s: 1.14, 1.29, 0.95 → median 1.14.
	if b := barNamed(t, bs, "ours / twin-tuned (Books/s"); b.Result != "PASS" || b.Min != 0.95 {
		t.Errorf("ours / twin-tuned Books/s: %+v", b)
	}
	// CPU 1 vs 2: 0.5 ≤ 0.8.
	if b := barNamed(t, bs, "ours / twin-tuned (CPU"); b.Median != 0.5 || b.Result != "PASS" {
		t.Errorf("CPU bar: %+v", b)
	}
	// 800/300 = 2.67, 3, 3.17: passes ≥ 2.0.
	if b := barNamed(t, bs, "ours / twin-default (Books/s"); b.Result != "PASS" {
		t.Errorf("twin-default bar: %+v", b)
	}
	// RSS bars apply at N ≥ 10000 only.
	if b := barNamed(t, bs, "ours / twin-tuned (peak RSS"); !strings.HasPrefix(b.Result, "n/a") {
		t.Errorf("RSS bar at N=2000: %+v, want n/a", b)
	}
	// Capacity 0.7, 0.8, 0.6 of the live ceiling → median 0.7 passes ≥ 0.7.
	if b := barNamed(t, bs, "ours capacity at p99 ≤ 1000 ms / best live ceiling"); b.Median != 0.7 || b.Result != "PASS" {
		t.Errorf("capacity bar: %+v", b)
	}
	// The live ceiling is the best live concurrency, not the backlog one.
	if b := barNamed(t, bs, "best live ceiling"); b.Median != 666.667 || !strings.Contains(b.Values[0].Figures, "C=64: 500") {
		t.Errorf("live ceiling: %+v", b)
	}
	// Ours against the load generator's own capacity (0.8): 0.875 median.
	if b := barNamed(t, bs, "ours capacity / the load generator's"); b.Median != 0.875 || b.Result != "info" {
		t.Errorf("capacity against the generator's: %+v", b)
	}
	// The same capacity against the backlog ceiling is reported, not judged:
	// 0.7 × 2/3 = 0.467.
	if b := barNamed(t, bs, "ours capacity at p99 ≤ 1000 ms / best (backlog)"); b.Median != 0.467 || b.Result != "info" {
		t.Errorf("capacity against the backlog ceiling: %+v", b)
	}
	// ours − tuned: 0.1, 0.2, −0.1 → median 0.1 passes.
	if b := barNamed(t, bs, "ours capacity −"); b.Median != 0.1 || b.Result != "PASS" {
		t.Errorf("capacity vs twin-tuned bar: %+v", b)
	}
	// One write on restart in one round fails the bar whatever the median.
	if b := barNamed(t, bs, "writes on restart"); b.Median != 0 || b.Result != "FAIL" {
		t.Errorf("restart bar: %+v, want median 0 and FAIL", b)
	}
}

func TestBarsFailOnTheMedianAndApplyRSSAtTenThousand(t *testing.T) {
	res := &Result{N: 10000, Rounds: []*Round{
		testRound(1, 1000, 700, 800, 400, 0.5, 0.6, 0),
		testRound(2, 1000, 950, 800, 400, 0.5, 0.6, 0),
		testRound(3, 1000, 800, 800, 400, 0.5, 0.6, 0),
	}}
	bs := bars(res)
	for prefix, want := range map[string]string{
		"ours / best ceiling":           "FAIL", // median 0.8 < 0.85
		"ours / twin-default (Books/s":  "PASS", // median 800/400 = 2.0
		"ours / twin-tuned (peak RSS":   "PASS", // 50/80 = 0.625
		"ours / twin-default (peak RSS": "PASS", // 50/90 = 0.56
		"ours capacity at":              "FAIL", // 0.5
		"ours capacity −":               "FAIL", // −0.1
	} {
		if b := barNamed(t, bs, prefix); b.Result != want {
			t.Errorf("%s: %s (median %g), want %s", prefix, b.Result, b.Median, want)
		}
	}
}

func TestEachRoundHasItsOwnReproducibleOrder(t *testing.T) {
	plan := []unit{{name: "a"}, {name: "b"}, {name: "c"}, {name: "d"}, {name: "e"}, {name: "f"}}
	names := func(us []unit) string {
		var s []string
		for _, u := range us {
			s = append(s, u.name)
		}
		return strings.Join(s, ",")
	}
	e := &env{o: options{seed: 42}}
	orders := map[string]bool{}
	for r := 1; r <= 3; r++ {
		o := names(e.order(r, plan))
		if again := names(e.order(r, plan)); again != o {
			t.Errorf("round %d: order %s, then %s with the same seed", r, o, again)
		}
		orders[o] = true
	}
	if len(orders) < 3 {
		t.Errorf("3 rounds ran only %d different orders: %v", len(orders), orders)
	}
	if names(plan) != "a,b,c,d,e,f" {
		t.Errorf("the plan itself was reordered: %s", names(plan))
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := slices.Clone(c.in)
		if got := median(in); got != c.want {
			t.Errorf("median(%v) = %g, want %g", c.in, got, c.want)
		}
		if !slices.Equal(in, c.in) {
			t.Errorf("median reordered its input: %v", in)
		}
	}
}

// The backfill bar compares the queue's work, from the caches' sync (the
// Lease taken) to idle, not the time since the start: a Lease taken 4 s
// later does not fail ours.
func TestBackfillBarCountsFromTheSync(t *testing.T) {
	res := &Result{N: largeN}
	for i := 1; i <= 3; i++ {
		r := testRound(i, 1000, 800, 700, 300, 0.7, 0.6, 0)
		r.LiveRestarts = []*LiveRestart{
			{Config: "ours", Failover: true, SyncedSeconds: 19.6, IdleSeconds: 20.6},
			{Config: "ours-fifo", Failover: true, SyncedSeconds: 15.4, IdleSeconds: 16.4},
			{Config: "ours", SyncedSeconds: 6, IdleSeconds: 9},
			{Config: "ours-fifo", SyncedSeconds: 6, IdleSeconds: 8},
		}
		res.Rounds = append(res.Rounds, r)
	}
	bs := bars(res)
	if b := barNamed(t, bs, "failover-live: ours backfill"); b.Result != "PASS" || b.Median < 0.99 || b.Median > 1.01 {
		t.Errorf("failover backfill: %+v, want 1.0 (1 s after the Lease for both), PASS", b)
	}
	if b := barNamed(t, bs, "restart-live: ours backfill"); b.Result == "PASS" || b.Median != 1.5 {
		t.Errorf("restart backfill: %+v, want 1.5 (3 s vs 2 s after the sync), FAIL", b)
	}
}

// -report recomputes the bars of a saved run and writes its report again.
func TestReportRewritesASavedRun(t *testing.T) {
	dir := t.TempDir()
	saved := &Result{N: largeN, Rounds: []*Round{testRound(1, 1000, 800, 700, 300, 0.7, 0.6, 0)}}
	saved.Rounds[0].LiveRestarts = []*LiveRestart{
		{Config: "ours", SyncedSeconds: 6, IdleSeconds: 7},
		{Config: "ours-fifo", SyncedSeconds: 5, IdleSeconds: 6},
	}
	if err := writeJSON(dir+"/old.json", saved); err != nil {
		t.Fatal(err)
	}
	if err := rereport(options{report: dir + "/old.json", out: dir, label: "again"}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(dir + "/again.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "restart-live: ours backfill / arrival order's (synced to idle)") {
		t.Errorf("again.md has no backfill bar:\n%s", md)
	}
	if err := rereport(options{report: dir + "/again.md", out: dir, label: "bad"}); err == nil || !strings.Contains(err.Error(), "not a bench result") {
		t.Errorf("-report of a Markdown file: got %v, want a one-line refusal", err)
	}
}
