package manager

import (
	"context"
	"fmt"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/metrics"
)

// NewEventRecorder starts an events.k8s.io/v1 broadcaster that sends to the
// API server until ctx ends, and returns a recorder for Books. The recorder
// resolves object references through a scheme that knows both core types and
// Book, kept private rather than registered in client-go's global scheme.
//
// Events beyond qps (with burst) are dropped, not queued: client-go's
// broadcaster sends each Event from a goroutine of its own, so a client-side
// rate limit would park one goroutine per Event in a burst of new Books, and
// sending them all would take the API server's capacity from the writes that
// converge Books. Events are best effort; status is the record. qps <= 0
// sends every Event.
func NewEventRecorder(ctx context.Context, kubeClient kubernetes.Interface, qps float32, burst int) (events.EventRecorder, error) {
	return newEventRecorder(ctx, kubeClient, eventLimiter(qps, burst))
}

// eventLimiter is the token bucket of NewEventRecorder, nil for no limit.
// With shards, one bucket is shared by every shard's recorder, so that the
// limit stays the process's.
func eventLimiter(qps float32, burst int) flowcontrol.RateLimiter {
	if qps <= 0 {
		return nil
	}
	return flowcontrol.NewTokenBucketRateLimiter(qps, max(burst, 1))
}

// newEventRecorder is NewEventRecorder with its token bucket (nil: none).
func newEventRecorder(ctx context.Context, kubeClient kubernetes.Interface, limiter flowcontrol.RateLimiter) (events.EventRecorder, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building event scheme: %w", err)
	}
	if err := webappv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building event scheme: %w", err)
	}
	var sink events.EventSink = &events.EventSinkImpl{Interface: kubeClient.EventsV1()}
	if limiter != nil {
		sink = &droppingSink{EventSink: sink, limiter: limiter}
	}
	broadcaster := events.NewBroadcaster(sink)
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, fmt.Errorf("starting event broadcaster: %w", err)
	}
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	return broadcaster.NewRecorder(scheme, controller.ReportingController), nil
}

// droppingSink sends an Event only when its token bucket has a token.
type droppingSink struct {
	events.EventSink
	limiter flowcontrol.RateLimiter
}

// Create sends the Event, or drops it when over the rate. A dropped Event
// reports success with no object, which makes the broadcaster neither retry
// nor log it.
func (s *droppingSink) Create(ctx context.Context, event *eventsv1.Event) (*eventsv1.Event, error) {
	if !s.limiter.TryAccept() {
		metrics.EventsDropped.Inc()
		return nil, nil
	}
	return s.EventSink.Create(ctx, event)
}

// Update sends the Event update, or drops it when over the rate.
func (s *droppingSink) Update(ctx context.Context, event *eventsv1.Event) (*eventsv1.Event, error) {
	if !s.limiter.TryAccept() {
		metrics.EventsDropped.Inc()
		return nil, nil
	}
	return s.EventSink.Update(ctx, event)
}

// Patch sends the series patch, or drops it when over the rate.
func (s *droppingSink) Patch(ctx context.Context, event *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if !s.limiter.TryAccept() {
		metrics.EventsDropped.Inc()
		return nil, nil
	}
	return s.EventSink.Patch(ctx, event, data)
}
