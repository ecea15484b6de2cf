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
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// errNotOurTurn is wrapped by the error of an acquisition the gate holds
// back. client-go's elector logs it and tries again a retry period later.
var errNotOurTurn = errors.New("not this replica's turn to take the shard")

// gate spreads the shards over the replicas. Every replica runs one
// leader elector per shard, each ready to take its shard's Lease when the
// Lease is free (missing, released, or not renewed for a lease duration);
// the gate decides which of those attempts may go ahead:
//
//   - a replica holding no shard tries at once, one shard at a time;
//   - a replica holding a shard tries for another only once that shard has
//     stayed free for a full lease duration more, which leaves it to
//     replicas holding none (spares, replicas starting) to take first.
//
// So N replicas starting together take a shard each, a spare takes over a
// shard whose holder died, and a lone replica still ends up serving every
// shard, one lease duration later. "Free since" is the first attempt the
// gate saw, forgotten when the Lease is seen renewed by someone else.
type gate struct {
	leaseDuration time.Duration
	clock         clock.PassiveClock

	// mu guards the fields below: every slot's elector goroutine calls
	// Begin, End and SeenHeld (through its Lease lock), and every slot's
	// goroutine released.
	mu sync.Mutex
	// held are the shards whose Lease this replica holds.
	held map[int]bool
	// trying is the shard being acquired, -1 if none.
	trying int
	// freeSince is when each shard was first seen free.
	freeSince map[int]time.Time
	// guard, if not nil, holds every attempt back while replicas of
	// another shard count hold shard Leases (count.go). Set before any
	// slot runs.
	guard *countGuard
}

func newGate(leaseDuration time.Duration, clk clock.PassiveClock) *gate {
	return &gate{leaseDuration: leaseDuration, clock: clk, held: map[int]bool{}, trying: -1, freeSince: map[int]time.Time{}}
}

// turn is the gate as one shard's Lease lock sees it: a leader.Gate.
type turn struct {
	gate  *gate
	shard int
}

func (g *gate) turnFor(shard int) *turn { return &turn{gate: g, shard: shard} }

// Begin lets an attempt to acquire the shard go ahead, or says why not;
// after a nil error, End must be called with the outcome. The count guard
// is asked last, without the gate's lock (it lists the Leases), and only
// for the one attempt the gate lets through.
func (t *turn) Begin() error {
	if err := t.begin(); err != nil {
		return err
	}
	if g := t.gate.guard; g != nil {
		if err := g.check(context.Background()); err != nil {
			t.End(false)
			t.gate.forgetFree()
			return err
		}
	}
	return nil
}

// begin is Begin as far as the gate alone decides.
func (t *turn) begin() error {
	g := t.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock.Now()
	since, seen := g.freeSince[t.shard]
	if !seen {
		since = now
		g.freeSince[t.shard] = now
	}
	switch {
	case g.trying >= 0:
		return fmt.Errorf("%w: it is trying for shard %d first", errNotOurTurn, g.trying)
	case len(g.held) > 0 && now.Sub(since) < g.leaseDuration:
		return fmt.Errorf("%w: it holds %d shard(s), so it takes this one only after it has been free for %s (free since %s), leaving it to a replica that holds none",
			errNotOurTurn, len(g.held), g.leaseDuration, since.Format(time.RFC3339))
	}
	g.trying = t.shard
	return nil
}

// End records the outcome of the attempt Begin let through.
func (t *turn) End(acquired bool) {
	g := t.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	g.trying = -1
	if acquired {
		g.held[t.shard] = true
		delete(g.freeSince, t.shard)
	}
}

// forgetFree forgets when every shard was seen free: while replicas of
// another count hold shard Leases, a free shard cannot be taken, so the
// time does not count towards a replica taking a second one once they are
// gone (it would take two at once, ahead of the replicas holding none).
func (g *gate) forgetFree() {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.freeSince)
}

// SeenHeld forgets when the shard was seen free: someone else holds it.
func (t *turn) SeenHeld() {
	g := t.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.freeSince, t.shard)
}

// released records that this replica no longer holds the shard: it gave
// the Lease up, or lost it.
func (t *turn) released() {
	g := t.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.held, t.shard)
}
