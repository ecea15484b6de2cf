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

package shard

import (
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestShardGate: a replica takes its first shard at once, one attempt at a
// time, and a further one only once it has been free for a lease duration;
// a renewal by someone else restarts that count, and a replica that holds
// nothing again may take a shard at once.
func TestShardGate(t *testing.T) {
	const ld = 15 * time.Second
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g := newGate(ld, clk)
	s0, s1, s2 := g.turnFor(0), g.turnFor(1), g.turnFor(2)

	if err := s0.Begin(); err != nil {
		t.Fatalf("first attempt of a replica holding nothing: %v", err)
	}
	if err := s1.Begin(); !errors.Is(err, errNotOurTurn) {
		t.Fatalf("a second attempt while the first is under way: %v, want refused", err)
	}
	s0.End(false) // someone else was faster
	if err := s1.Begin(); err != nil {
		t.Fatalf("after a failed attempt, still holding nothing: %v", err)
	}
	s1.End(true)

	if err := s2.Begin(); !errors.Is(err, errNotOurTurn) {
		t.Fatalf("holding shard 1, shard 2 just seen free: %v, want refused", err)
	}
	clk.SetTime(clk.Now().Add(ld - time.Second))
	s2.SeenHeld() // renewed by someone: free no more
	if err := s2.Begin(); !errors.Is(err, errNotOurTurn) {
		t.Fatalf("shard 2 seen free again just now: %v, want refused", err)
	}
	clk.SetTime(clk.Now().Add(ld))
	if err := s2.Begin(); err != nil {
		t.Fatalf("shard 2 free for a lease duration: %v, want allowed", err)
	}
	s2.End(true)

	s1.released()
	s2.released()
	if err := s0.Begin(); err != nil {
		t.Fatalf("holding nothing again: %v, want allowed at once", err)
	}
}
