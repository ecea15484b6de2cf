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
	"testing"
	"time"
)

// TestBoundFigures: nearest-rank percentiles, 3 × p99, and the samples over
// the slack held to now.
func TestBoundFigures(t *testing.T) {
	var ms []float64
	for i := 100; i >= 1; i-- { // in any order
		ms = append(ms, float64(i))
	}
	f := figures("x", ms, nil, 97*time.Millisecond)
	if f.Samples != 100 || f.MinMs != 1 || f.P50Ms != 50 || f.P99Ms != 99 || f.MaxMs != 100 || f.ThreeP99Ms != 297 || f.Over != 3 {
		t.Errorf("figures: %+v; want 100 samples, min 1, p50 50, p99 99, max 100, 3 × p99 297, 3 over 97 ms", f)
	}
	if f := figures("y", []float64{-5, 40}, nil, time.Second); f.P99Ms != 40 || f.P50Ms != -5 {
		t.Errorf("two samples: p50 %v, p99 %v; want -5, 40", f.P50Ms, f.P99Ms)
	}
}
