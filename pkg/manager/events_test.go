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
