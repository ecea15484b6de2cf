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

package poll

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestUntilReturnsOnceTheCheckHolds(t *testing.T) {
	calls := 0
	err := Until(t.Context(), "the third call", time.Millisecond, time.Minute, func(context.Context) error {
		calls++
		return Done(calls == 3, "call %d", calls)
	})
	if err != nil {
		t.Fatalf("Until: %v", err)
	}
	if calls != 3 {
		t.Errorf("check called %d times, want 3 (at once, then until it held)", calls)
	}
}

func TestUntilNamesWhatAndTheLastObservation(t *testing.T) {
	calls := 0
	err := Until(t.Context(), "the queue to empty", time.Millisecond, 50*time.Millisecond, func(context.Context) error {
		calls++
		return fmt.Errorf("queue length %d", calls)
	})
	if err == nil {
		t.Fatal("Until returned nil for a check that never held")
	}
	msg := err.Error()
	for _, want := range []string{"timed out after ", "waiting for the queue to empty", fmt.Sprintf("last seen: queue length %d", calls)} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
}

// A check cut short by the deadline (a Get on the expired context) must not
// hide what the check saw before.
func TestUntilKeepsTheObservationBeforeTheDeadline(t *testing.T) {
	err := Until(t.Context(), "the Book", time.Millisecond, 30*time.Millisecond, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
			return errors.New("Ready=False ConfigMapConflict")
		}
	})
	if err == nil || !strings.Contains(err.Error(), "last seen: Ready=False ConfigMapConflict") {
		t.Errorf("got %v, want the last full observation", err)
	}
}

func TestUntilSaysWhenItsContextEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	err := Until(ctx, "anything", time.Millisecond, time.Minute, func(context.Context) error {
		cancel()
		return errors.New("not yet")
	})
	if err == nil || !strings.Contains(err.Error(), "stopped (context canceled)") || !strings.Contains(err.Error(), "last seen: not yet") {
		t.Errorf("got %v, want stopped (context canceled) with the last observation", err)
	}
}

func TestUntilGivesUpAtOnceOnStop(t *testing.T) {
	calls := 0
	exited := errors.New("it exited")
	err := Until(t.Context(), "the process to be ready", time.Millisecond, time.Minute, func(context.Context) error {
		calls++
		if calls == 2 {
			return Stop(exited)
		}
		return errors.New("not ready")
	})
	if !errors.Is(err, exited) || !strings.Contains(err.Error(), "gave up after ") ||
		!strings.Contains(err.Error(), "waiting for the process to be ready: it exited") {
		t.Errorf("got %v, want it to give up with the check's error", err)
	}
	if calls != 2 {
		t.Errorf("check called %d times, want 2", calls)
	}
}

func TestDone(t *testing.T) {
	if err := Done(true, "x"); err != nil {
		t.Errorf("Done(true): %v", err)
	}
	if err := Done(false, "queue length %d", 2); err == nil || err.Error() != "queue length 2" {
		t.Errorf("Done(false): %v, want queue length 2", err)
	}
}

func TestUnchangedHoldsOnlyAfterTheValueStoppedMoving(t *testing.T) {
	n := 0
	value := func() int { return n }
	slow := Unchanged(time.Hour, value)
	if err := slow(t.Context()); err == nil {
		t.Fatal("held at the first look")
	}
	n++
	if err := slow(t.Context()); err == nil || !strings.HasPrefix(err.Error(), "1, unchanged for ") {
		t.Fatalf("after a change: %v, want not yet, at 1", err)
	}

	// On the fake clock of a synctest bubble, 25 ms pass exactly.
	synctest.Test(t, func(t *testing.T) {
		quick := Unchanged(20*time.Millisecond, value)
		if err := quick(t.Context()); err == nil {
			t.Fatal("held at the first look")
		}
		time.Sleep(25 * time.Millisecond)
		if err := quick(t.Context()); err != nil {
			t.Errorf("unchanged for 25ms of 20ms: %v", err)
		}
		n++
		if err := quick(t.Context()); err == nil {
			t.Error("held right after a change")
		}
	})
}
