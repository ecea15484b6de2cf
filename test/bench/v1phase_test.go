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

import "testing"

// The v1 bar is v2's Books/s over the last v1-only release's in the same
// round, judged on the median.
func TestV2IsHeldToTheLastV1Release(t *testing.T) {
	withV1 := func(i int, ours, v1 float64) *Round {
		r := testRound(i, 1000, ours, 700, 300, 0.7, 0.6, 0)
		r.Phases = append(r.Phases, &Phase{Name: v1Phase, Config: "v1", Mode: "backlog", BooksPerSecond: v1, CPUSeconds: 1, N: 2000})
		return r
	}
	for _, c := range []struct {
		name        string
		ours        [3]float64
		median      float64
		wantVerdict string
	}{
		// 0.9, 0.96, 1.0: one round misses, the median passes.
		{"median within 5 %", [3]float64{360, 384, 400}, 0.96, "PASS"},
		// 0.9, 0.94, 1.0: the median misses by 0.01.
		{"median 6 % slower", [3]float64{360, 376, 400}, 0.94, "FAIL"},
	} {
		res := &Result{N: 2000, CapacityP99Ms: 1000}
		for i, ours := range c.ours {
			res.Rounds = append(res.Rounds, withV1(i+1, ours, 400))
		}
		b := barNamed(t, bars(res), "ours (v2) / "+v1Release+" (v1 only) (Books/s")
		if b.Median != c.median || b.Result != c.wantVerdict {
			t.Errorf("%s: median %v, %s; want %v, %s", c.name, b.Median, b.Result, c.median, c.wantVerdict)
		}
	}
	// Without the phase the bar says it was not measured, never PASS.
	res := &Result{N: 2000, CapacityP99Ms: 1000, Rounds: []*Round{testRound(1, 1000, 900, 700, 300, 0.7, 0.6, 0)}}
	if b := barNamed(t, bars(res), "ours (v2) / "+v1Release); b.Result == "PASS" {
		t.Errorf("without %s: %s, want not measured", v1Phase, b.Result)
	}
}
