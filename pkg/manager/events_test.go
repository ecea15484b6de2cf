package manager

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/util/flowcontrol"

	"ydzs.io/book-controller/pkg/metrics"
)

// countingSink records what reaches the API server side of the sink.
type countingSink struct{ created, updated, patched int }

func (s *countingSink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.created++
	return e, nil
}

func (s *countingSink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.updated++
	return e, nil
}

func (s *countingSink) Patch(_ context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	s.patched++
	return e, nil
}

// TestDroppingSinkDropsEventsOverTheRate: within the burst Events go
// through; past it they are dropped (reported as sent, so the broadcaster
// neither retries nor parks a goroutine on them) and counted.
func TestDroppingSinkDropsEventsOverTheRate(t *testing.T) {
	inner := &countingSink{}
	// A rate so low that no token is refilled during the test.
	sink := &droppingSink{EventSink: inner, limiter: flowcontrol.NewTokenBucketRateLimiter(0.0001, 2)}
	before := testutil.ToFloat64(metrics.EventsDropped)

	ctx := context.Background()
	for range 4 {
		ev, err := sink.Create(ctx, &eventsv1.Event{})
		if err != nil {
			t.Fatalf("Create returned %v; a dropped Event must not be an error, or the broadcaster retries it", err)
		}
		_ = ev
	}
	if _, err := sink.Patch(ctx, &eventsv1.Event{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Update(ctx, &eventsv1.Event{}); err != nil {
		t.Fatal(err)
	}

	if inner.created != 2 || inner.patched != 0 || inner.updated != 0 {
		t.Errorf("reached the API: %d creates, %d patches, %d updates; want 2, 0, 0", inner.created, inner.patched, inner.updated)
	}
	if got := testutil.ToFloat64(metrics.EventsDropped) - before; got != 4 {
		t.Errorf("book_controller_events_dropped_total moved by %v, want 4", got)
	}
}
