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

package leader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/utils/clock"
)

// ErrWriteFenced is wrapped by the error of every API write the fence
// refuses.
var ErrWriteFenced = errors.New("write refused: this replica does not hold the leader-election Lease")

// Fence lets this process write to the API server only while it can
// prove that it holds the Lease of its Elector. It wraps the transport of
// every client that writes on behalf of the Elector's Work (Books,
// ConfigMaps, Events: Wrap), so no worker, drain or Event can write after
// leadership is lost. The elector's own Lease client is not fenced: it
// must renew, and release.
//
// The proof is time. Each successful renewal of the Lease that a standby
// can see (reported by fencingLock) opens the fence until the moment the
// renewal was sent plus the renew deadline, and each admitted write gets a
// context that ends at that same moment. A standby takes the Lease only a
// lease duration after it saw the last renewal, which it cannot have seen
// before the renewal was sent; the lease duration being longer than the
// renew deadline, a leader that is partitioned, slowed down or paused stops
// writing before any other replica may start, whether or not its elector
// has noticed yet. What no client can stop is a write already on its way:
// one admitted at the last moment reaches the server as late as the network
// delivers it, so the promise holds while that takes less than the lease
// duration minus the renew deadline (5 s with the defaults).
//
// Once the deadline passes without renewal, or the Lease shows another
// holder, leadership is lost for good: the fence never opens again, the
// writing clients' connections are closed (so bytes queued on a half-dead
// connection cannot reach the server after a partition heals), and the
// Elector's Run returns ErrLost: the process exits, or with shards the
// shard's slot stands by again, with a new Elector and a new fence.
type Fence struct {
	renewDeadline time.Duration
	clock         clock.WithDelayedExecution
	refused       prometheus.Counter // nil: not counted

	// mu guards every field below. They are written by the elector's
	// goroutine (renewed, taken), the expiry timer's (expire), Run's
	// (lose, stepDown), the writers' (admit, done) and whoever builds the
	// writing clients (Wrap); the probes and the metrics scrape read them
	// (Leading, Healthy, Cause).
	mu    sync.Mutex
	state fenceState
	// conns dial the writing clients' connections (Wrap); closed on a
	// loss, and when Run returns.
	conns []*connrotation.Dialer
	// lastRenewal is when the latest successful renewal (or the
	// acquisition) was sent; writes are admitted until validUntil, that
	// moment plus the renew deadline.
	lastRenewal, validUntil time.Time
	expiry                  clock.Timer // fires at validUntil
	cause                   error       // why leadership was lost
	inflight                int         // admitted writes not yet answered
	idle                    chan struct{}
	// lost is closed by lose when leadership is lost (not on a step-down).
	lost chan struct{}
}

// fenceState is where the fence is in the life of its Elector. It only
// moves forward: standingBy → leading → (steppedDown | lost).
type fenceState int

const (
	standingBy  fenceState = iota // the Lease was never acquired: writes refused
	leading                       // writes admitted while the last renewal is recent enough
	steppedDown                   // shutting down gracefully: writes refused for good
	lostLease                     // leadership lost: writes refused for good
)

func newFence(renewDeadline time.Duration, clk clock.WithDelayedExecution, refused prometheus.Counter) *Fence {
	return &Fence{
		renewDeadline: renewDeadline,
		clock:         clk,
		refused:       refused,
		lost:          make(chan struct{}),
	}
}

// Wrap returns a copy of cfg that dials through conns and whose mutating
// requests (POST, PUT, PATCH, DELETE) pass only through an open fence. The
// fence closes conns' connections on a loss and when Run returns; reads
// through them are not fenced.
func (f *Fence) Wrap(cfg *rest.Config, conns *connrotation.Dialer) *rest.Config {
	f.mu.Lock()
	f.conns = append(f.conns, conns)
	f.mu.Unlock()
	cfg = rest.CopyConfig(cfg)
	cfg.Dial = conns.DialContext
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &fencedTransport{fence: f, next: rt} })
	return cfg
}

// closeConnections closes the connections of every writing client.
func (f *Fence) closeConnections() {
	f.mu.Lock()
	conns := f.conns
	f.mu.Unlock()
	for _, c := range conns {
		c.CloseAll()
	}
}

// renewed records a successful acquisition or renewal of the Lease that was
// sent at sent. The first one opens the fence.
func (f *Fence) renewed(sent time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch f.state {
	case standingBy:
		f.state = leading
	case leading:
	default:
		return // a renewal racing the step-down or the loss changes nothing
	}
	if until := sent.Add(f.renewDeadline); until.After(f.validUntil) {
		f.lastRenewal, f.validUntil = sent, until
	}
	if f.expiry != nil {
		f.expiry.Stop()
	}
	// expire runs in a goroutine of its own: a fake clock fires timers
	// while holding a lock that expire's calls to it would take again.
	f.expiry = f.clock.AfterFunc(f.validUntil.Sub(f.clock.Now()), func() { go f.expire() })
}

// expire closes the fence for good if the renew deadline has passed.
func (f *Fence) expire() {
	f.mu.Lock()
	if f.state != leading || f.clock.Now().Before(f.validUntil) {
		f.mu.Unlock()
		return
	}
	last := f.lastRenewal
	f.mu.Unlock()
	f.lose(fmt.Errorf("the Lease was not renewed within the %s renew deadline (the last renewal standbys could see was sent at %s)",
		f.renewDeadline, last.Format(time.RFC3339Nano)))
}

// taken closes the fence for good if this process leads and the Lease shows
// another holder.
func (f *Fence) taken(holder string) {
	f.mu.Lock()
	isLeading := f.state == leading
	f.mu.Unlock()
	if !isLeading {
		return
	}
	if holder == "" {
		f.lose(errors.New("the Lease was released by someone else"))
		return
	}
	f.lose(fmt.Errorf("the Lease is held by %q now", holder))
}

// lose closes the fence for good, records why, closes the writing clients'
// connections and closes lost. It does nothing after a step-down.
func (f *Fence) lose(cause error) {
	f.mu.Lock()
	if f.state == steppedDown || f.state == lostLease {
		f.mu.Unlock()
		return
	}
	f.state, f.cause = lostLease, cause
	if f.expiry != nil {
		f.expiry.Stop()
	}
	close(f.lost)
	f.mu.Unlock()
	f.closeConnections()
}

// Cause is why leadership was lost, or nil.
func (f *Fence) Cause() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cause
}

// stepDown closes the fence for good ahead of a graceful release, and waits
// until the writes already admitted have been answered (or ctx ends), so
// that the Lease is given up only after the last write. It returns false if
// leadership was lost before: also when the renew deadline has passed and
// the expiry timer has yet to say so (a drain cut short by the deadline can
// end just before it).
func (f *Fence) stepDown(ctx context.Context) bool {
	f.mu.Lock()
	if f.state == leading && !f.clock.Now().Before(f.validUntil) {
		f.mu.Unlock()
		f.expire()
		f.mu.Lock()
	}
	if f.state == lostLease {
		f.mu.Unlock()
		return false
	}
	f.state = steppedDown
	if f.expiry != nil {
		f.expiry.Stop()
	}
	var idle chan struct{}
	if f.inflight > 0 {
		if f.idle == nil {
			f.idle = make(chan struct{})
		}
		idle = f.idle
	}
	f.mu.Unlock()
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
		}
	}
	return true
}

// Leading reports whether writes are admitted now.
func (f *Fence) Leading() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state == leading && f.clock.Now().Before(f.validUntil)
}

// Healthy fails from the moment leadership is lost, and also when the
// renew deadline has passed without the fence noticing, so that the
// kubelet restarts a replica stuck on its way out.
func (f *Fence) Healthy() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.state == lostLease:
		return fmt.Errorf("leadership lost (%v); exiting", f.cause)
	case f.state == leading && !f.clock.Now().Before(f.validUntil):
		return fmt.Errorf("the Lease has not been renewed since %s, past the %s renew deadline",
			f.lastRenewal.Format(time.RFC3339Nano), f.renewDeadline)
	}
	return nil
}

// admit lets one write through if the fence is open, and returns how long
// it may take; done must be called when it is answered.
func (f *Fence) admit() (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var why string
	switch f.state {
	case standingBy:
		why = "it has not acquired the Lease"
	case leading:
		now := f.clock.Now()
		if left := f.validUntil.Sub(now); left > 0 {
			f.inflight++
			return left, nil
		}
		why = fmt.Sprintf("its last renewal standbys could see was sent at %s, more than the %s renew deadline ago",
			f.lastRenewal.Format(time.RFC3339Nano), f.renewDeadline)
	case steppedDown:
		why = "it is shutting down and has stopped writing"
	case lostLease:
		why = f.cause.Error()
	}
	if f.refused != nil {
		f.refused.Inc()
	}
	return 0, fmt.Errorf("%w: %s", ErrWriteFenced, why)
}

// done marks an admitted write answered.
func (f *Fence) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight--
	if f.inflight == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

// fencedTransport sends reads as they are and writes only through the fence,
// each with a context that ends when the fence would close.
type fencedTransport struct {
	fence *Fence
	next  http.RoundTripper
}

func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return t.next.RoundTrip(req)
	}
	left, err := t.fence.admit()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	ctx, cancel := context.WithTimeout(req.Context(), left)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		t.fence.done()
		return nil, err
	}
	resp.Body = &answeredBody{ReadCloser: resp.Body, done: func() {
		cancel()
		t.fence.done()
	}}
	return resp, nil
}

// answeredBody calls done once, when the response body is closed: client-go
// reads a write's whole answer and then closes it.
type answeredBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *answeredBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}
