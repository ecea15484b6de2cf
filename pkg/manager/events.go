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
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1" // fork:line v2
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/metrics"
)

// newEventRecorder starts an events.k8s.io/v1 broadcaster that sends to the
// API server until ctx ends, and returns a recorder for Books. The recorder
// resolves object references through a scheme that knows both core types and
// Book, kept private rather than registered in client-go's global scheme.
//
// Events beyond the token bucket limiter (eventLimiter) are dropped, not
// queued: client-go's
// broadcaster sends each Event from a goroutine of its own, so a client-side
// rate limit would park one goroutine per Event in a burst of new Books, and
// sending them all would take the API server's capacity from the writes that
// converge Books. Events are best effort; status is the record. A nil
// limiter sends every Event.
//
// They are dropped before the recorder builds them. The broadcaster keeps
// every Event it is handed in its series cache for 6 to 12 minutes (to
// count repeats), whether or not the sink then sends it: dropped at the
// sink, a burst of 10000 new Books left 10000 Events in memory, and each
// cost a copy, two deep copies and a goroutine (measured by the benchmark).
// Measured: docs/benchmark.md. // fork:line bench
func newEventRecorder(ctx context.Context, kubeClient kubernetes.Interface, limiter flowcontrol.RateLimiter) (events.EventRecorder, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building event scheme: %w", err)
	}
	if err := webappv2.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building event scheme: %w", err)
	}
	// fork:begin v2
	// The storage migration's Events are about the Book CRD.
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building event scheme: %w", err)
	}
	// fork:end v2
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: kubeClient.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, fmt.Errorf("starting event broadcaster: %w", err)
	}
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	var recorder events.EventRecorder = broadcaster.NewRecorder(scheme, controller.ReportingController)
	if limiter != nil {
		recorder = &droppingRecorder{EventRecorder: recorder, limiter: limiter}
	}
	return recorder, nil
}

// droppingRecorder passes an Event on to the recorder only when its token
// bucket has a token, and counts the others as dropped.
type droppingRecorder struct {
	events.EventRecorder
	limiter flowcontrol.RateLimiter
}

// Eventf records the Event, or drops it when over the rate.
func (r *droppingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if !r.limiter.TryAccept() {
		metrics.EventsDropped.Inc()
		return
	}
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// eventLimiter is the token bucket of every recorder of the process, nil
// for no limit: with shards, one bucket is shared by every shard's
// recorder, so that the limit stays the process's.
func eventLimiter(qps float32, burst int) flowcontrol.RateLimiter {
	if qps <= 0 {
		return nil
	}
	return flowcontrol.NewTokenBucketRateLimiter(qps, max(burst, 1))
}
