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
