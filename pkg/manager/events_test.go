package manager

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/flowcontrol"

	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/metrics"
)

// countingRecorder counts the Events handed to the real recorder, which
// builds each and hands it to the broadcaster.
type countingRecorder struct{ recorded int }

func (r *countingRecorder) Eventf(_, _ runtime.Object, _, _, _, _ string, _ ...any) { r.recorded++ }

// TestDroppingRecorderDropsEventsOverTheRate: within the burst Events go
// through; past it they are dropped before the recorder builds them (so
// the broadcaster never holds them in its series cache) and counted.
func TestDroppingRecorderDropsEventsOverTheRate(t *testing.T) {
	inner := &countingRecorder{}
	// A rate so low that no token is refilled during the test.
	rec := &droppingRecorder{EventRecorder: inner, limiter: flowcontrol.NewTokenBucketRateLimiter(0.0001, 2)}
	before := testutil.ToFloat64(metrics.EventsDropped)

	for range 6 {
		rec.Eventf(nil, nil, "Normal", controller.EventConfigMapCreated, "Create", "Created ConfigMap %s", "x")
	}

	if inner.recorded != 2 {
		t.Errorf("%d Events reached the recorder, want the burst of 2", inner.recorded)
	}
	if got := testutil.ToFloat64(metrics.EventsDropped) - before; got != 4 {
		t.Errorf("book_controller_events_dropped_total moved by %v, want 4", got)
	}
}
