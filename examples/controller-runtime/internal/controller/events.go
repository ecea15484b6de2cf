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

package controller

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
)

// NewDroppingRecorder returns a recorder that passes at most qps Events per
// second (burst above it) to rec and drops the rest, as book-controller's
// --event-qps does. The manager's recorder sends every Event and offers no
// rate limit of its own; wrapping it is how a controller-runtime user gets
// one. qps <= 0 returns rec unchanged.
func NewDroppingRecorder(rec events.EventRecorder, qps float32, burst int) events.EventRecorder {
	if qps <= 0 {
		return rec
	}
	return &droppingRecorder{EventRecorder: rec, limiter: flowcontrol.NewTokenBucketRateLimiter(qps, max(burst, 1))}
}

type droppingRecorder struct {
	events.EventRecorder
	limiter flowcontrol.RateLimiter
}

// Eventf records the Event when a token is available, and drops it otherwise.
func (r *droppingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if r.limiter.TryAccept() {
		r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
	}
}
