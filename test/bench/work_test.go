package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func TestWorkRunsEveryIndexOnceAndReportsAnError(t *testing.T) {
	const n = 500
	var seen [n]atomic.Int32
	boom := errors.New("boom")
	_, err := work(context.Background(), n, 16, 0, func(i int) error {
		seen[i].Add(1)
		if i == 7 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("work returned %v, want the failing index's error", err)
	}
	for i := range seen {
		if got := seen[i].Load(); got != 1 {
			t.Fatalf("index %d ran %d times, want once (an error must not stop the others)", i, got)
		}
	}
}
